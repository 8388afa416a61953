"""Hooks for the whole test tree. Only what pytest reads from the tests' root directory belongs here."""

from __future__ import annotations

import pytest


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """With `-m e2e`, the version of each control-plane component the e2e tests start (tests/e2e)."""
    expression = (config.getoption("markexpr") or "").replace(" ", "")
    if "e2e" not in expression or expression == "note2e":
        return None
    from tests.e2e import controlplane

    return controlplane.header_lines()
