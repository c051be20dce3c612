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


def fenced_block(document: str, first_line: str) -> list[str]:
    """The lines of the fenced (```) block in ``document`` whose first line is ``first_line``."""
    lines = (ROOT / document).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```") and i + 1 < len(lines) and lines[i + 1] == first_line:
            end = lines.index("```", i + 1)
            return lines[i + 1:end]
    raise ValueError(f"{document} has no fenced block starting with {first_line!r}")
