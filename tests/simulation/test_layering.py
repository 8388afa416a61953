"""The simulator is no part of the function: nothing on the live path imports it or matplotlib."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

LIVE = sorted(
    path
    for path in [Path("main.py"), *Path("compactor").glob("*.py"), *Path("compactor/core").glob("*.py")]
    if path.exists()
)


@pytest.mark.parametrize("module", LIVE, ids=[str(path) for path in LIVE])
def test_no_live_module_imports_the_simulator_at_module_level(module: Path) -> None:
    tree = ast.parse(module.read_text())
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        bad = [name for name in names if name.startswith(("compactor.simulation", "matplotlib"))]
        assert not bad, f"{module} imports {bad}"


def test_only_the_command_line_reaches_the_simulator() -> None:
    for module in LIVE:
        if module.name == "cli.py":
            continue
        assert "compactor.simulation" not in module.read_text(), module


def test_loading_the_function_and_the_command_line_loads_neither_the_simulator_nor_matplotlib() -> None:
    code = (
        "import sys\n"
        "import compactor.cli, compactor.service, compactor.actuation.executor\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('compactor.simulation', 'matplotlib')))\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_simulator_runs_without_loading_the_kubernetes_client() -> None:
    """The simulator's ports answer as the API client does (`compactor.kube.answers`) without the client's
    package, whose import is most of a short simulation's start."""
    code = (
        "import sys\n"
        "import compactor.cli, compactor.simulation.runner, compactor.simulation.report\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("package", ["matplotlib", "highspy"])
def test_the_function_requirements_do_not_ship_the_simulators_packages(package: str) -> None:
    assert package not in Path("requirements.txt").read_text()
    assert package in Path("requirements-simulate.txt").read_text()
