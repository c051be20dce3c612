"""The lock files agree with pyproject.toml, and the environment the suite runs in is the locked one.

pyproject.toml keeps ranges for users of the package; `make install` installs the exact, hash-checked
versions of requirements-test.lock, and the image those of requirements.lock. A range changed without
`make lock`, a lock edited by hand, or a test run outside the locked environment shows up here.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from tests.support.paths import ROOT
from tests.support.parts import not_tested

RUNTIME, TEST = ROOT / "requirements.lock", ROOT / "requirements-test.lock"
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$")


def read_lock(path: Path) -> dict[str, str]:
    """name -> version; every entry must carry at least one sha256 hash and nothing may float."""
    pins: dict[str, str] = {}
    name = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if entry := _ENTRY.match(line):
            name = canonicalize_name(entry.group(1))
            assert name not in pins, f"{path.name}:{number}: {name} is pinned twice"
            pins[name] = entry.group(2)
        elif line.strip().startswith("--hash=sha256:"):
            assert name is not None, f"{path.name}:{number}: a hash before any pin"
            pins.setdefault(f"{name} hashed", "yes")
        else:
            pytest.fail(f"{path.name}:{number}: not a pinned, hashed requirement: {line!r}")
    unhashed = [n for n in pins if " " not in n and f"{n} hashed" not in pins]
    assert not unhashed, f"{path.name}: pins without a hash: {unhashed}"
    return {n: v for n, v in pins.items() if " " not in n}


def declared() -> tuple[list[Requirement], list[Requirement], list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = [Requirement(r) for r in project["project"]["dependencies"]]
    test = [Requirement(r) for r in project["project"]["optional-dependencies"]["test"]]
    build = [Requirement(r) for r in project["build-system"]["requires"]]
    return runtime, test, build


def unmet(requirements: list[Requirement], pins: dict[str, str]) -> list[str]:
    problems = []
    for req in requirements:
        version = pins.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req} is not locked")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} is locked at {version}, outside its range")
    return problems


def test_every_declared_requirement_is_locked_within_its_range():
    runtime, test, build = declared()
    assert unmet(runtime + build, read_lock(RUNTIME)) == [], "run `make lock`"
    assert unmet(runtime + test + build, read_lock(TEST)) == [], "run `make lock`"


def test_the_two_locks_pin_the_same_versions_and_the_test_lock_only_adds():
    runtime, test = read_lock(RUNTIME), read_lock(TEST)
    assert {n: test.get(n) for n in runtime} == runtime
    test_only = set(test) - set(runtime)
    # what the test lock adds is reached from the test extra alone (pytest and what it needs)
    assert {canonicalize_name(r.name) for r in declared()[1]} <= test_only | set(runtime)
    assert "pytest" in test_only


def test_the_suite_runs_in_the_locked_environment():
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        not_tested("lockedenv", "not the project's own virtualenv (`make install` makes it)")
    wrong = {}
    for name, version in read_lock(TEST).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (installed, version)
    assert wrong == {}, "installed differs from requirements-test.lock: run `make install`"


def test_a_range_the_lock_does_not_meet_is_caught():
    pins = read_lock(TEST)
    too_new = Requirement(f"pyyaml>{pins['pyyaml']}")
    assert unmet([too_new], pins) == [f"{too_new} is locked at {pins['pyyaml']}, outside its range"]
    assert unmet([Requirement("not-a-locked-package>=1")], pins) == ["not-a-locked-package>=1 is not locked"]
