"""The planner stays pure: no cloud, cluster or web library is reachable from compactor.core."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("kubernetes", "google", "flask", "functions_framework", "ijson", "requests", "urllib3")
# Shell modules the core must not reach either: they talk to the outside world.
SHELL = (
    "compactor.kube.snapshot",
    "compactor.kube.quantity",
    "compactor.cli",
    "compactor.kube.client",
    "compactor.gcp.gke",
    "compactor.gcp.firestore",
    "compactor.actuation.executor",
    "compactor.service",
)
CORE = sorted(Path("compactor/core").glob("*.py"))


@pytest.mark.parametrize("module", CORE, ids=[path.stem for path in CORE])
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
