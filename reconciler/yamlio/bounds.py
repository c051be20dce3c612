"""What the YAML and JSON readers share below both: the integer bound and the two signals their parsers raise.

``yamlio`` (which must not import PyYAML until a YAML text arrives) and
``yamlio.classes`` (PyYAML's loader classes) both raise these; ``yamlio`` turns
them into input errors naming the file and line.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Any

MAX_INT_DIGITS = 1000  # Kubernetes integers fit in 19 digits; Python refuses to convert more than 4300


class LongNumber(Exception):
    """An integer of more than ``MAX_INT_DIGITS`` digits (``line`` where the parser knows it)."""

    def __init__(self, digits: int, line: int | None) -> None:
        super().__init__(digits, line)
        self.digits, self.line = digits, line


class DuplicateKey(Exception):
    """A key set twice in one mapping: ``first`` and ``line`` are where (0 where unknown)."""

    def __init__(self, key: Any, first: int, line: int) -> None:
        super().__init__(key, first, line)
        self.key, self.first, self.line = key, first, line
