"""The command blocks of the project's documents, found by their first line, so tests run what a reader copies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def indented_block(document: str, first_line: str, *, after: str = "") -> list[str]:
    """The lines of the block indented by four spaces in ``document`` (relative to the root) that starts with
    ``first_line`` (the first such block after the line ``after``, when given), without their indentation."""
    lines = (ROOT / document).read_text().splitlines()
    start = lines.index(f"    {first_line}", lines.index(after) + 1 if after else 0)
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return block


def fenced_block(document: str, first_line: str) -> list[str]:
    """The lines of the fenced (```) block in ``document`` whose first line is ``first_line``."""
    lines = (ROOT / document).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```") and i + 1 < len(lines) and lines[i + 1] == first_line:
            end = lines.index("```", i + 1)
            return lines[i + 1:end]
    raise ValueError(f"{document} has no fenced block starting with {first_line!r}")


def run_walkthrough(block: list[str], home: Path, *, cwd: Path = ROOT,
                    env: dict[str, str] | None = None) -> list[tuple[str, str, int]]:
    """Run ``block`` line by line in one bash from ``cwd`` (the project's root), as a reader with ``home`` as HOME,
    no kubeconfig and no cluster would (``env`` adds to or overrides that: a cluster's KUBECONFIG, a peer on the
    PATH); each line's (line, output, exit code). A ``# exit N: phrase`` comment is checked (the code, and the
    phrase up to a parenthesis, comma or semicolon in the output); any other line must exit 0."""
    marker = "@@rc="
    script = "".join(f"{line}\necho \"{marker}$?\"\n" for line in block)
    reader = {**os.environ, "HOME": str(home), "KUBECONFIG": "", "GIT_AUTHOR_NAME": "Reader",
              "GIT_AUTHOR_EMAIL": "reader@example.invalid", "GIT_COMMITTER_NAME": "Reader",
              "GIT_COMMITTER_EMAIL": "reader@example.invalid", "RECONCILER_CACHE_DIR": str(home / "cache"),
              "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    reader.pop("KUBERNETES_SERVICE_HOST", None)
    reader.update(env or {})
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=reader, capture_output=True, text=True, timeout=600)
    outputs = re.split(rf"^{re.escape(marker)}(\d+)\n", proc.stdout, flags=re.M)
    steps = list(zip(block, outputs[0::2], (int(c) for c in outputs[1::2])))
    assert len(steps) == len(block), proc.stdout + proc.stderr
    for line, out, code in steps:
        said = re.search(r"# exit (\d+): (.*?)(?: \(|,|;|$)", line)
        if said:
            assert code == int(said.group(1)), f"{line}\n{out}{proc.stderr}"
            assert said.group(2).split(" (")[0] in out, f"{line}\n{out}"
        else:
            assert code == 0, f"{line}\n{out}{proc.stderr}"
    return steps


def assert_printed(printed: list[str], output: str, *, normalise=lambda text: text, section: bool = False) -> None:
    """``output`` is exactly the block ``printed`` that a document shows for it: the whole of it, line for line
    (``normalise`` replaces what differs from run to run, a commit id or a port, on both sides), so a line the
    command adds, drops or changes shows here, not only a line the document quotes. A ``…`` in the document
    stands for what it elides (a commit id, a key's fingerprint): any text there. ``section``: the block is one
    paragraph of the output (from its first line to the next blank line), compared whole."""
    shown, said = normalise("\n".join(printed)).splitlines(), normalise(output.rstrip("\n")).splitlines()
    if section:
        start = next((i for i, line in enumerate(said) if _matches(shown[0], line)), None)
        assert start is not None, f"the output has no line {shown[0]!r}:\n{output}"
        end = next((i for i in range(start, len(said)) if not said[i].strip()), len(said))
        said = said[start:end]
    same = len(said) == len(shown) and all(_matches(doc, out) for doc, out in zip(shown, said))
    assert same, "the document prints:\n" + "\n".join(shown) + "\n\nthe command prints:\n" + "\n".join(said)


def _matches(documented: str, printed: str) -> bool:
    """Whether a printed line is the documented one, a ``…`` of the document matching any text."""
    if "…" not in documented:
        return documented == printed
    return re.fullmatch(".+?".join(re.escape(part) for part in documented.split("…")), printed) is not None
