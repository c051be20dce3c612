"""tests/unit/ follows reconciler/'s folders: a stage's unit tests are found under the stage's own folder name."""

from __future__ import annotations

from tests.support.paths import RECONCILER, ROOT

UNIT = ROOT / "tests" / "unit"
# the package and the project as a whole (the import graph, the lock files, the test suite's own rules)
WHOLE = "project"


def _folders() -> list[str]:
    return sorted(str(p.relative_to(UNIT)) for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__")


def test_every_folder_of_the_unit_tests_is_a_folder_of_the_package():
    strays = [f for f in _folders() if f != WHOLE and not (RECONCILER / f / "__init__.py").is_file()]
    assert strays == [], f"tests/unit/{strays[0]} names no package of reconciler/: put its tests under the folder " \
                         f"of reconciler/ their subject lives in"


def test_no_test_module_sits_outside_a_package_folder():
    loose = sorted(p.name for p in UNIT.glob("test_*.py"))
    assert loose == [], f"tests/unit/{loose[0]}: move it under tests/unit/<package>/, the folder of reconciler/ " \
                        f"its subject lives in (tests/unit/{WHOLE}/ for the package as a whole)"


def test_every_folder_is_a_package():
    # two test modules of one name in two folders are told apart by their packages
    missing = [f for f in _folders() if not (UNIT / f / "__init__.py").is_file()]
    assert missing == [], f"tests/unit/{missing[0]} has no __init__.py"
