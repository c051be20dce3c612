"""The command line. ``main`` is the console entry point, ``parser`` builds the parser, runs a command and maps
errors to exit codes; the commands themselves are ``reconciler/commands/``, one module per group. Progress and
log lines are set up here but live in ``reconciler/report/``, where the pipeline and the loop report into them
too."""
