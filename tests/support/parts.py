"""The parts of the suite a run may leave untested, and the list of them every run ends with.

Some tests need what a machine may lack: the shared corpus, a peer built
from the Go module proxy, OLM, a tool apt-get installs, root. Each such part
is a marker declared in pyproject.toml's ``[tool.pytest.ini_options]``
``markers``, and a test that needs it says so with the marker (so ``-m``
selects or leaves out the part):

* declared, with the condition: ``@pytest.mark.corpus(missing=not CORPUS.is_dir(),
  reason="../shared/corpus is absent")`` (as a decorator, in ``pytestmark`` or in ``pytest.param(marks=...)``);
  the test is skipped before its fixtures are set up when ``missing`` is true;
* found out while running (a peer that turns out not to build): ``not_tested("opm", "opm is not built ...")``.

No test skips any other way (``tests/unit/project/test_skips.py`` reads every
test module), so each skip names the part it leaves untested, and the
terminal summary of every run lists those parts: how many tests of each were
not run, and why.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NoReturn

import pytest

# a report's user property naming the part its test left untested
PROPERTY = "not_tested"


def declared(config: pytest.Config) -> dict[str, str]:
    """The markers pyproject.toml declares, each with its description: the parts a skip may name."""
    lines = (line.split(":", 1) for line in config.getini("markers"))
    return {name.strip(): (rest[0].strip() if rest else "") for name, *rest in lines}


_PARTS: dict[str, str] = {}


def not_tested(part: str, reason: str) -> NoReturn:
    """Skip the running test (or the fixture being set up): ``part`` is not tested in this run, for ``reason``."""
    if _PARTS and part not in _PARTS:
        raise ValueError(f"{part!r} is no part declared in pyproject.toml's markers: {', '.join(sorted(_PARTS))}")
    skip = pytest.skip.Exception(reason, _use_item_location=True)   # reported at the test, as a skip mark is
    skip.part = part
    raise skip


def pytest_configure(config: pytest.Config) -> None:
    _PARTS.clear()
    _PARTS.update(declared(config))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers():
        if mark.name in _PARTS and mark.kwargs.get("missing"):
            not_tested(mark.name, mark.kwargs.get("reason") or f"what {mark.name} needs is missing")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    part = getattr(call.excinfo.value, "part", None) if call.excinfo is not None else None
    if part is not None and report.skipped:
        report.user_properties.append((PROPERTY, part))
    return report


def untested(reports: list) -> dict[str, dict[str, int]]:
    """Per part, each reason its tests were skipped for and how many (a skip naming no part: ``unnamed``)."""
    parts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for report in reports:
        part = dict(getattr(report, "user_properties", ())).get(PROPERTY, "unnamed")
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        parts[part][reason.removeprefix("Skipped: ")] += 1
    return parts


def summary(parts: dict[str, dict[str, int]]) -> list[str]:
    if not parts:
        return ["Not tested in this run: nothing (no test was skipped)."]
    lines = ["Not tested in this run:"]
    for part, reasons in sorted(parts.items()):
        count = sum(reasons.values())
        said = "; ".join(reason if len(reasons) == 1 else f"{reason} ({n})" for reason, n in sorted(reasons.items()))
        lines.append(f"  {part} ({count} test{'s' if count != 1 else ''}): {said}")
    return lines


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config):  # noqa: ANN001, ANN201
    yield   # after pytest's own summary (-ra's lines): the last thing before the counts
    if config.option.collectonly:
        return
    for line in summary(untested(terminalreporter.stats.get("skipped", []))):
        terminalreporter.write_line(line)
