"""One exception hierarchy, rooted in ReconcilerError.

Every error a user can meet says where (file, object), what is wrong and what
to do. The CLI maps the hierarchy to exit codes that say whose move it is:
0 success, 1 changes found by a dry run or a diff (as ``kubectl diff``), 2 the
repository's content (fix a file), 3 the cluster (check the cluster), 4 an
approval is pending (commit one), 5 applied but not healthy, 64 a usage error
(fix the command line, as sysexits' EX_USAGE), 70 an internal error (a bug
to report, as EX_SOFTWARE) and 141 when the reader of the output went away
(128 + SIGPIPE, as a shell reports for other tools in ``... | head``).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHANGES = 1
EXIT_ERROR = 2
EXIT_CLUSTER = 3
EXIT_PENDING_APPROVAL = 4
EXIT_UNHEALTHY = 5
EXIT_USAGE = 64
EXIT_INTERNAL = 70
EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe


class ReconcilerError(Exception):
    """Base of every error the reconciler reports to a user."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, path: str | None = None, obj: str | None = None,
                 hint: str | None = None) -> None:
        self.message = message
        self.path = path
        self.obj = obj
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(printable(p) for p in (self.path, self.obj) if p)
        message = printable_lines(self.message)
        text = f"{where}: {message}" if where else message
        if self.hint:
            text += f"\n  hint: {printable_lines(self.hint)}"
        return text


_ESCAPES: dict[int, str] = {}
MAX_LINE = 4000   # characters of one line of an error; the middle of a longer one is left out


def printable(text: str) -> str:
    """``text`` on one line and safe for a terminal: a name from the input (a file name may hold a newline,
    an escape sequence, bytes that are not UTF-8) can neither forge a line of output nor drive the terminal.

    Control characters and bidirectional overrides are shown as escapes, and a byte that is not UTF-8 (kept
    as a lone surrogate when a file name is decoded) as ``\\xNN``. A line over ``MAX_LINE`` characters
    keeps its start and end.
    """
    if len(text) > MAX_LINE:   # a name of a megabyte is legal JSON; a line of one helps nobody
        text = f"{text[:MAX_LINE // 2]}...({len(text) - MAX_LINE} characters)...{text[-MAX_LINE // 2:]}"
    if text.isprintable():
        return text
    if not _ESCAPES:
        _ESCAPES.update({c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))})
        _ESCAPES.update({9: "\\t", 10: "\\n", 13: "\\r"})
        _ESCAPES.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                     *range(0x2066, 0x206A), *range(0xD800, 0xE000))})
        _ESCAPES.update({c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)})
    return text.translate(_ESCAPES)


def printable_lines(text: str) -> str:
    """``printable`` for a message that lists details on indented lines: those line breaks are kept, so every
    line but the first starts with two spaces, and no name in the text can start a line of its own."""
    return "\n  ".join(printable(part) for part in text.split("\n  "))


class InputError(ReconcilerError):
    """A file in the repository cannot be read or is not valid."""


class DeclarationError(InputError):
    """An Operator/Input declaration is malformed."""


class CatalogError(InputError):
    """A file-based catalog is malformed or inconsistent."""


class ResolutionError(ReconcilerError):
    """The declarations cannot be satisfied by the catalogs."""


class BundleError(ReconcilerError):
    """A bundle cannot be fetched, read or converted."""


class UnsupportedBundleError(BundleError):
    """A bundle uses a feature the converter does not support."""


class LockfileError(ReconcilerError):
    """The lockfile is malformed or stale."""


class PolicyError(ReconcilerError):
    """A change is held back by the approval policy."""


class ClusterError(ReconcilerError):
    """The cluster could not be reached or refused a request."""

    exit_code = EXIT_CLUSTER


class ControlPlaneError(ReconcilerError):
    """The local control plane could not be built, started or stopped."""


class InternalError(ReconcilerError):
    """An unexpected exception, wrapped so a long-running caller can report it like any other error."""

    exit_code = EXIT_INTERNAL

    @classmethod
    def wrap(cls, exc: BaseException) -> InternalError:
        text = " ".join(str(exc).split())[:500]
        return cls(f"internal error: {type(exc).__name__}: {text}",
                   hint="this is a bug in the reconciler; please report it with the input that caused it")


class UsageError(ReconcilerError):
    """The command line asks for something contradictory."""

    exit_code = EXIT_USAGE
