"""Start-up: the CLI as a process, beside opm, and what importing costs.

  python -m bench.startup_bench [--repeat 10]

Rows, each the best of --repeat runs of a whole process (interpreter or Go
runtime start-up included on both sides):

  --help                    ``reconciler --help``              vs ``opm --help``
  validate, one package     ``reconciler catalog validate --no-cache DIR`` vs ``opm validate DIR``
                            (a catalog of one package, one channel, one bundle)
  ... cache hit             ``reconciler catalog validate DIR`` once the first run has written its cache
  resolve --offline         ``reconciler resolve --offline`` of examples/gitops-repo (no peer)

and the import cost, from ``python -X importtime``, of what each command
loads (the cumulative microseconds of its top-level module), with the heavy
libraries that must not be among them (kubernetes, deepdiff, pysat, celpy,
oras, pygit2).

The reconciler runs as a wheel installs it: a virtual environment of its own
holding the package with its bytecode compiled, the development environment's
libraries on its path, and the ``reconciler`` command pip writes for the
``[project.scripts]`` entry point (``python -m reconciler`` would add runpy's
imports, which an installed command does not pay). Run from the checkout
instead, two costs no user pays would be measured: compiling every module from source on each start (with
PYTHONDONTWRITEBYTECODE set, nothing is cached) and the editable install's
import hook, which imports pathlib and re before anything else.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
HEAVY = ("kubernetes", "deepdiff", "pysat", "celpy", "oras", "pygit2")
ONE_PACKAGE = """---
schema: olm.package
name: foo
defaultChannel: stable
---
schema: olm.channel
package: foo
name: stable
entries:
  - name: foo.v1.0.0
---
schema: olm.bundle
package: foo
name: foo.v1.0.0
image: quay.io/example/foo:v1.0.0
properties:
  - type: olm.package
    value: {packageName: foo, version: 1.0.0}
"""


SCRIPT = """#!{python}
import re
import sys
from reconciler.cli.parser import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def installed(tmp: Path, root: Path = ROOT) -> tuple[str, dict[str, str]]:
    """An interpreter with the package (of the checkout ``root``) installed as a wheel would be; and its environment.

    The ``reconciler`` command beside the interpreter is the script pip writes for the entry point.
    """
    venv = tmp / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    shutil.copytree(root / "reconciler", site / "reconciler", ignore=shutil.ignore_patterns("__pycache__"))
    # The libraries of this environment, as plain path entries: their .pth hooks are not run.
    (site / "libraries.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    python = str(venv / "bin" / "python")
    script = venv / "bin" / "reconciler"
    script.write_text(SCRIPT.format(python=python))
    script.chmod(0o755)
    subprocess.run([python, "-m", "compileall", "-q", str(site / "reconciler")], check=True,
                   stdout=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    return python, env


def best(cmd: list[str], repeat: int, env: dict[str, str], cwd: Path | None = None) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return min(times)


def command(python: str) -> str:
    """The installed ``reconciler`` command of ``installed``'s interpreter."""
    return str(Path(python).parent / "reconciler")


def imports(python: str, args: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, list[str]]:
    """Total import time (seconds) of a CLI run and which heavy libraries it loaded."""
    proc = subprocess.run([python, "-X", "importtime", command(python), *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
    total, heavy = 0, set()
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].lstrip()
        if len(parts[2]) - len(name) == 1:  # a top-level import: its cumulative time covers its children
            total += int(parts[1])
        if name.split(".")[0] in HEAVY:
            heavy.add(name.split(".")[0])
    return total / 1e6, sorted(heavy)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    from bench.peers.opm import opm_binary

    opm = str(opm_binary())
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        python, env = installed(tmp)
        env["RECONCILER_CACHE_DIR"] = str(tmp / "cache")
        catalog = tmp / "one"
        catalog.mkdir()
        (catalog / "catalog.yaml").write_text(ONE_PACKAGE)
        repo = tmp / "repo"
        shutil.copytree(ROOT / "examples" / "gitops-repo", repo)
        ours = [command(python)]
        rows = [
            ("--help", best([*ours, "--help"], args.repeat, env), best([opm, "--help"], args.repeat, env),
             imports(python, ["--help"], env)),
            ("catalog validate, one package", best([*ours, "catalog", "validate", "--no-cache", str(catalog)],
                                                   args.repeat, env),
             best([opm, "validate", str(catalog)], args.repeat, env),
             imports(python, ["catalog", "validate", "--no-cache", str(catalog)], env)),
            # the same command as a user runs it: the first run writes the cache, the rest read it
            ("catalog validate, one package, cache hit", best([*ours, "catalog", "validate", str(catalog)],
                                                              args.repeat + 1, env),
             best([opm, "validate", str(catalog)], args.repeat, env),
             imports(python, ["catalog", "validate", str(catalog)], env)),
            ("resolve --offline (example repository)",
             best([*ours, "resolve", "--offline", "--no-write", str(repo)], args.repeat, env), None,
             imports(python, ["resolve", "--offline", "--no-write", str(repo)], env)),
        ]
        bare = best([python, "-c", "pass"], args.repeat, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nstart-up, best of {args.repeat} processes\n")
    print("| command | reconciler s | opm s | ratio | imports s | heavy libraries loaded |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label, mine, peer, (imported, heavy) in rows:
        ratio = f"{mine / peer:.2f}" if peer else "-"
        print(f"| {label} | {mine:.3f} | {f'{peer:.3f}' if peer else '-'} | {ratio} | {imported:.3f} | "
              f"{', '.join(heavy) or 'none'} |")
    print(f"\nratio = reconciler / opm (the target is at most 2). A bare `python -c pass` in the same environment: "
          f"{bare:.3f} s")


if __name__ == "__main__":
    main()
