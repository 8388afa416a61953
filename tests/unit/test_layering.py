"""The tree shows the architecture: only entry points at the top of compactor/, rooms importing only downward,
no import circle, and a pure planner (no cloud, cluster or web library reachable from compactor.core)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("kubernetes", "google", "flask", "functions_framework", "ijson", "requests", "urllib3")
# The rooms the core must not reach either: they talk to the outside world or act on it.
SHELL = ("compactor.kube", "compactor.gcp", "compactor.actuation", "compactor.cli", "compactor.service")
CORE = sorted(Path("compactor/core").rglob("*.py"))
# core's own sub-rooms, split by concern (STYLE 13).
CORE_ROOMS = {"prices", "replacement"}
# What may stand directly in compactor/: the entry points and the two leaves every room uses.
ENTRY_POINTS = {
    "__init__.py",
    "__main__.py",
    "cli.py",
    "service.py",
    "http.py",
    "cleanup.py",
    "report.py",
    "permissions.py",
    "errors.py",
    "logs.py",
}
ROOMS = {"core", "kube", "gcp", "actuation", "settings", "simulation", "hpa"}


def test_only_the_entry_points_stand_at_the_top_of_the_package() -> None:
    top = {path.name for path in Path("compactor").glob("*.py")}
    assert top - ENTRY_POINTS == set(), "a module that is not an entry point belongs in one of the rooms"
    rooms = {path.name for path in Path("compactor").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert rooms == ROOMS


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_room_says_what_lives_in_it_and_what_it_may_import(room: str) -> None:
    docstring = ast.get_docstring(ast.parse(Path(f"compactor/{room}/__init__.py").read_text()))
    assert docstring, f"compactor/{room}/__init__.py has no docstring"
    assert "import" in docstring


@pytest.mark.parametrize("room", sorted(CORE_ROOMS))
def test_each_room_of_the_core_says_what_lives_in_it_and_what_it_may_import(room: str) -> None:
    docstring = ast.get_docstring(ast.parse(Path(f"compactor/core/{room}/__init__.py").read_text()))
    assert docstring, f"compactor/core/{room}/__init__.py has no docstring"
    assert "import" in docstring
    rooms = {path.name for path in Path("compactor/core").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert rooms == CORE_ROOMS


def test_imports_run_only_downward_and_never_in_a_circle() -> None:
    # The contracts (layers and acyclic siblings) are in pyproject.toml, [tool.importlinter].
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command, "lint-imports (import-linter, requirements-dev.txt) is not installed"
    result = subprocess.run([command, "--no-cache"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module", CORE, ids=[str(path.relative_to("compactor/core").with_suffix("")) for path in CORE])
def test_a_core_module_imports_no_io_library(module: Path) -> None:
    tree = ast.parse(module.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    bad = sorted(name for name in imported if name.split(".")[0] in FORBIDDEN or name.startswith(SHELL))
    assert not bad, f"{module} imports {bad}"


def test_importing_the_planner_loads_no_io_library_even_indirectly() -> None:
    # Namespace-package .pth files (functions-framework ships one) create `google` at start-up,
    # so only what the import itself adds counts.
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import compactor.core.planner\n"
        f"bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_core_reads_no_clock() -> None:
    for module in CORE:
        text = module.read_text()
        for call in ("datetime.now(", "time.time(", "time.monotonic(", "datetime.utcnow("):
            assert call not in text, f"{module} calls {call}"


# The simulator's LP solver (requirements-simulate.txt): the Cloud Function never carries it, and the simulator
# loads it on its first solve, so not even `simulate` pays for its import before it needs it.
SOLVERS = ("highspy", "scipy")


@pytest.mark.parametrize("module", ["main", "compactor.service", "compactor.cli", "compactor.simulation.runner"])
def test_importing_the_function_or_the_simulator_loads_no_lp_solver(module: str) -> None:
    code = (
        "import sys\n"
        f"import {module}\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {SOLVERS!r})))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
