"""The fuzz suite's session report: how many inputs each category tried."""

from __future__ import annotations

import pytest

from tests.fuzz import profiles


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not profiles.tried:
        return
    terminalreporter.section(f"fuzz inputs tried (profile {profiles.profile_name()})")
    for category, count in sorted(profiles.tried.items()):
        terminalreporter.write_line(f"{category:<18} {count:>7}")
