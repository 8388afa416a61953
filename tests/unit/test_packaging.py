"""`pip install .` / `pipx install .`: a `node-compactor` command equal to `python -m compactor`, the runtime
dependencies of requirements.txt, and the `compactor` package with its subpackages only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from compactor import cli

ROOT = Path(__file__).resolve().parents[2]
# The version the wheel is built with, unlike the source tree's: an installed command must print its own.
INSTALLED_VERSION = "0.1.0.post9"


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def pins(name: str) -> list[str]:
    """A requirements file's own pins (comments and `-r` includes left out)."""
    lines = (ROOT / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith(("#", "-r"))]


def test_the_dependencies_are_the_pins_of_requirements_txt() -> None:
    assert pyproject()["project"]["dependencies"] == pins("requirements.txt")


def test_the_plot_and_simulate_extras_are_what_requirements_simulate_adds() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    assert extras["plot"] + extras["simulate"] == pins("requirements-simulate.txt")


def test_the_development_requirements_hold_the_simulators() -> None:
    assert set(pins("requirements-simulate.txt")) <= set(pins("requirements-dev.txt"))


def test_the_command_is_the_module_entry_point() -> None:
    assert pyproject()["project"]["scripts"] == {"node-compactor": "compactor.cli:console"}
    assert (ROOT / "compactor" / "__main__.py").read_text().count("console()") == 1
    assert callable(cli.console)


def test_only_the_compactor_package_is_found() -> None:
    assert pyproject()["tool"]["setuptools"]["packages"]["find"] == {"include": ["compactor", "compactor.*"]}


def test_the_wheel_holds_the_package_and_the_command(tmp_path: Path) -> None:
    # Built from a copy, so the source tree gets no build/ or egg-info; with the setuptools already
    # installed, so no index is asked.
    source = tmp_path / "source"
    source.mkdir()
    shutil.copytree(ROOT / "compactor", source / "compactor", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "main.py"):
        shutil.copy(ROOT / name, source / name)
    project = (source / "pyproject.toml").read_text()
    version = f'version = "{pyproject()["project"]["version"]}"'
    assert version in project
    (source / "pyproject.toml").write_text(project.replace(version, f'version = "{INSTALLED_VERSION}"', 1))
    (source / "tests").mkdir()
    (source / "tests" / "__init__.py").write_text("")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), "."],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("node_compactor-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(name for name in names if name.endswith("entry_points.txt"))
        assert "node-compactor = compactor.cli:console" in archive.read(entry_points).decode()
        metadata = archive.read(next(name for name in names if name.endswith("METADATA"))).decode()
    top = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"compactor"}  # no tests, bench, examples or main.py
    assert "compactor/hpa/planner.py" in names and "compactor/simulation/plot.py" in names
    assert all(f"Requires-Dist: {pin}" in metadata for pin in pins("requirements.txt"))
    # Installed (the wheel unpacked where site-packages would be, away from the source tree), the command
    # prints the version of the distribution's metadata: here one the copy's pyproject.toml was given.
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    installed = subprocess.run(
        [sys.executable, "-m", "compactor", "--version"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (installed.returncode, installed.stdout) == (0, f"node-compactor {INSTALLED_VERSION}\n"), installed.stderr
