"""The command blocks of the project's documents, found by their first line, so tests run what a reader copies."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def indented_block(document: str, first_line: str) -> list[str]:
    """The lines of the block indented by four spaces in ``document`` (relative to the root) that starts with
    ``first_line``, without their indentation."""
    lines = (ROOT / document).read_text().splitlines()
    start = lines.index(f"    {first_line}")
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return block
