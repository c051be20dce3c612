"""Bundle conversion throughput over the real-world corpus: cold (every file parsed) and cached.

    .venv/bin/python -m bench.bundle_convert [CORPUS/operators]

"cold" starts from an empty cache, so every manifest is read and parsed
once; "cached" runs again over the same bundles, when the parsed content is
found by its digest and only the conversion itself runs. Each bundle is
fetched (content digest), read and converted with the default install.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from bench.bundle_corpus import DEFAULT_CORPUS, convert_all, find_bundles


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    corpus = Path(args[0]) if args else DEFAULT_CORPUS
    if not corpus.is_dir():
        print(f"no corpus at {corpus}", file=sys.stderr)
        return 2
    bundles, _ = find_bundles(corpus)
    size = sum(f.stat().st_size for b in bundles for f in b.rglob("*") if f.is_file())
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RECONCILER_CACHE_DIR"] = cache
        for scenario in ("cold", "cached"):
            started = time.perf_counter()
            outcomes = convert_all(corpus, bundles)
            elapsed = time.perf_counter() - started
            converted = sum(o.status == "converted" for o in outcomes)
            rows.append((scenario, len(bundles), converted, elapsed))
    print(f"corpus: {len(bundles)} bundles, {size / 1e6:.1f} MB of files")
    print("| scenario | bundles | converted | seconds | bundles/s | ms/bundle |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for scenario, n, converted, elapsed in rows:
        print(f"| {scenario} | {n} | {converted} | {elapsed:.1f} | {n / elapsed:.1f} | {1000 * elapsed / n:.0f} |")
    print(f"cached / cold speed-up: {rows[0][3] / rows[1][3]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
