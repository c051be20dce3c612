"""Command-line interface: a thin shell that dispatches to ``reconciler.commands``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from reconciler import __version__
from reconciler.commands import COMMANDS, EXIT_CODES, NO_NAMESPACE
from reconciler.errors import (
    EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERNAL, EXIT_USAGE, InputError, ReconcilerError,
)

TYPE_CHECKING = False  # typing is imported by type checkers only: see ARCHITECTURE.md
if TYPE_CHECKING:
    from typing import Collection, NoReturn, Sequence, TextIO


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on their own exit code (argparse's 2 is our repository-error code)."""

    def error(self, message: str) -> "NoReturn":
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def _print_message(self, message: str, file: TextIO | None = None) -> None:
        # argparse swallows a failed write; a closed pipe must end the run as it does for every other output
        if message:
            (file or sys.stderr).write(message)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse's own asks shutil for the width: importing shutil (and bz2 and lzma with it) is a tenth of a
        # short command's start-up, and every add_argument builds a formatter
        formatter = self.formatter_class(prog=self.prog, width=_columns() - 2)
        if hasattr(formatter, "_set_color"):  # Python 3.14 colours help; its own _get_formatter does this
            formatter._set_color(self.color)
        return formatter


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it: $COLUMNS, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
            columns = 0
    return columns or 80


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command tree; with ``command``, only that command's parser.

    Building every command's parsers is most of a short command's start-up, and a run uses one. With
    ``command=""`` (no known command: ``reconciler --help``, or a misspelt one) every command is kept as its
    ``--help`` line only, so the list of commands reads the same. A run of a known command builds no other
    command at all: the top-level usage names them only as ``COMMAND``, so nothing it prints differs.
    """
    parser = _Parser(
        prog="reconciler",
        description="Keep a cluster's operators equal to what a GitOps repository declares: resolve "
                    "Operator declarations against file-based catalogs, convert bundles to plain manifests, "
                    "and apply them with server-side apply, pruning what is no longer declared. -n/--namespace "
                    "may come before or after a command, as with kubectl; a command with no namespace to "
                    "choose says where it comes from instead.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"reconciler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lines_only = []  # never parse anything: a run builds its own command in full
    for name, line in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f"reconciler.commands.{name}").register(sub)
        elif not command:
            lines_only.append(sub.add_parser(name, help=line))
    _add_global_flags(parser, top=True, skip=lines_only)
    _add_examples(parser, "")
    for path, p in subcommands(parser).items():
        if path and p not in lines_only and "-n" not in p._option_string_actions:
            why = NO_NAMESPACE.get(path) or NO_NAMESPACE.get(path.split()[0]) or f"`reconciler {path}` takes no namespace"
            p.add_argument("-n", "--namespace", action=_NoNamespace, why=why)
    return parser


class _NoNamespace(argparse.Action):
    """-n/--namespace on a command that has no namespace to take: a usage error that says why (kubectl users
    type it everywhere), instead of argparse's "unrecognized arguments", or a value mistaken for REPO."""

    def __init__(self, option_strings: list[str], dest: str, why: str) -> None:
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.why = why

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string}: {self.why}")


def namespace_last(argv: Sequence[str]) -> list[str]:
    """``argv`` with each -n/--namespace (and its value) moved after the command's own words.

    As with kubectl (``kubectl -n NS get pods``), the namespace may come before the command; only the command
    that takes it (or says why it does not) knows the flag, so it is handed to that command. Nothing after a
    ``--`` moves.
    """
    words = list(argv)
    end = words.index("--") if "--" in words else len(words)
    head, moved, i = [], [], 0
    while i < end:
        w = words[i]
        if w in ("-n", "--namespace") and i + 1 < end:
            moved += words[i:i + 2]
            i += 2
            continue
        (moved if w.startswith("--namespace=") or (w.startswith("-n") and len(w) > 2 and w[2] != "-")
         else head).append(w)
        i += 1
    return head + moved + words[end:]


def subcommands(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its path after ``reconciler`` ("" for the top), e.g. ``catalog graph``."""
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.update(subcommands(child, f"{path} {name}".strip()))
    return found


def _add_examples(parser: argparse.ArgumentParser, path: str) -> None:
    """Put each command's ``Examples:`` above its epilog (the exit codes)."""
    from reconciler.commands.examples import EXAMPLES

    for name, p in subcommands(parser, path).items():
        if name in EXAMPLES:
            p.epilog = f"Examples:\n{EXAMPLES[name]}\n\n{p.epilog or ''}".rstrip() + "\n"
            p.formatter_class = argparse.RawDescriptionHelpFormatter


def _add_global_flags(parser: argparse.ArgumentParser, *, top: bool,
                      skip: Collection[argparse.ArgumentParser] = ()) -> None:
    """-v and -q, accepted before or after the command (as kubectl's global flags are); not on ``skip``."""
    default = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("-v", "--verbose", action="count", help="log more (repeat for debug)",
                        **({"default": 0} if top else default))
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress and no logs below errors; results and errors are still printed",
                        **default)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                if child not in skip:
                    _add_global_flags(child, top=False)


def invoked(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not a flag (the flags before it take no value)."""
    words = [w for w in argv if w != "--"]
    first = next((w for w in words if not w.startswith("-")), None)
    return first if first in COMMANDS else None


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    try:
        try:
            return _main(sys.argv[1:] if argv is None else list(argv), out)
        finally:  # what is still buffered (help included) meets a closed pipe here, not at the interpreter's exit
            for stream in {id(s): s for s in (out, sys.stdout) if s is not None}.values():
                stream.flush()
    except BrokenPipeError:
        # The reader went away (`reconciler ... | head`): stop printing, say nothing, and exit as a tool
        # stopped by SIGPIPE does, whatever was being written (help, a table, an error) and by whichever command.
        _silence_closed_streams()
        return EXIT_BROKEN_PIPE


def _silence_closed_streams() -> None:
    """Point stdout and stderr at /dev/null when their reader is gone, so that the interpreter's final flush
    of what is still buffered neither fails nor prints "Exception ignored"."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError):  # not a file descriptor (captured in-process)
                pass


def _invoked_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` was parsed for, e.g. ``catalog list``'s."""
    path = args.command or ""
    for dest in ("catalog_command", "action"):   # catalog; bundle, cluster and fleet
        if getattr(args, dest, None):
            path = f"{path} {getattr(args, dest)}"
    return subcommands(parser).get(path, parser)


def _check_repository_path(repo: str) -> None:
    """REPO is a directory: said first, before a command asks git or a cluster about it."""
    if not os.path.exists(repo):
        raise InputError(f"{repo}: no such directory", hint="REPO is the path of the GitOps repository's "
                                                            "working tree (the directory holding operators/ and "
                                                            "catalogs/), e.g. `.` at its root")
    if not os.path.isdir(repo):
        raise InputError(f"{repo}: is a file, not a directory", hint="REPO is the GitOps repository's working "
                                                                    "tree: give its directory")


def _main(argv: list[str], out: TextIO | None) -> int:
    argv = namespace_last(argv)
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions: answer and exit
        import argcomplete

        argcomplete.autocomplete(build_parser())
    parser = build_parser(invoked(argv) or "")
    args, unknown = parser.parse_known_args(argv)
    if unknown:   # the invoked command's usage, which lists its flags, not the top level's
        _invoked_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    from reconciler.report import logs, progress

    if args.command != "watch":  # the loop sets up its own logs (--log-level, --log-format)
        logs.setup(logs.level_for(args.verbose, args.quiet))
    try:
        if args.command != "watch" and isinstance(getattr(args, "repo", None), str):
            _check_repository_path(args.repo)
        if args.command == "watch":
            return args.run(args, out or sys.stdout)
        with progress.shown_on(sys.stderr, quiet=args.quiet, verbose=args.verbose):
            return args.run(args, out or sys.stdout)
    except ReconcilerError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        raise   # not a bug: main() ends the run quietly
    except Exception as exc:  # noqa: BLE001 - a bug must still end in one line and its own exit code
        text = " ".join(str(exc).split())[:500]
        print(f"error: internal error: {type(exc).__name__}: {text}\n"
              f"  hint: this is a bug in the reconciler; rerun with RECONCILER_TRACEBACK=1 and report the "
              f"traceback", file=sys.stderr)
        if os.environ.get("RECONCILER_TRACEBACK"):
            import traceback

            traceback.print_exc()
        return EXIT_INTERNAL
