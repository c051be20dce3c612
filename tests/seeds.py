"""The design documents' YAML examples, read from ../shared/seeds at test time (absent in a user's checkout).

Two kinds of block are examples: a fenced ```yaml block, and a run of lines that
starts at an ``apiVersion:`` or ``kind:`` line at the margin (the documents
converted from other formats lost their fences). Each is named by its
document's number and the line it starts on, e.g. ``001-line177``.
"""

from __future__ import annotations

import re
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
_KEY = re.compile(r"^[A-Za-z][\w.-]*:( .*)?$")
_PROSE = re.compile(r"^\s+(•|\d+\. )")   # the prose after an example: a bulleted or numbered list
_FENCED = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)


def margin_blocks(text: str) -> list[tuple[int, str]]:
    """Runs of YAML-looking lines from an ``apiVersion:`` or ``kind:`` line at the margin: (first line, text)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if not re.match(r"^(apiVersion|kind):", lines[i]):
            i += 1
            continue
        start, block = i, []
        while i < len(lines) and (_KEY.match(lines[i]) or lines[i].startswith((" ", "-")) or not lines[i].strip()) \
                and not _PROSE.match(lines[i]):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not lines[i].strip() and (not (_KEY.match(nxt) or nxt.startswith((" ", "-")))
                                         or _PROSE.match(nxt)):
                break
            block.append(lines[i])
            i += 1
        out.append((start + 1, "\n".join(block) + "\n"))
    return out


def all_blocks() -> dict[str, str]:
    """Every example of every document by name: the fenced blocks, then the margin blocks not inside one."""
    found: dict[str, str] = {}
    if not SEEDS.is_dir():
        return found
    for path in sorted(SEEDS.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        fenced = []
        for m in _FENCED.finditer(text):
            first = text.count("\n", 0, m.start(1)) + 1
            fenced.append(range(first, first + m.group(1).count("\n") + 1))
            found[f"{path.name[:3]}-line{first}"] = m.group(1)
        for line, block in margin_blocks(text):
            if not any(line in span for span in fenced):
                found[f"{path.name[:3]}-line{line}"] = block
    return found
