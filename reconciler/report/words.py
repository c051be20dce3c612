"""Counted nouns in what the reconciler prints: "1 problem", "2 problems", never "1 problems" or "2 problem(s)".

One function so every message counts the same way; a noun whose plural is not its singular plus "s" (entry,
policy) is given its plural.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``counted(1, "cluster")`` is "1 cluster"."""
    return f"{n} {noun if n == 1 else plural or _plural(noun)}"


def _plural(noun: str) -> str:
    head, _, last = noun.rpartition(" ")
    word = last
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        word = word[:-1] + "ies"
    elif word.endswith(("s", "x", "ch", "sh")):
        word += "es"
    else:
        word += "s"
    return f"{head} {word}" if head else word


def agree(n: int, one: str, many: str) -> str:
    """The verb (or any word) that goes with ``n`` of something: ``agree(1, "was", "were")`` is "was"."""
    return one if n == 1 else many
