from reconciler.cli.parser import main

raise SystemExit(main())
