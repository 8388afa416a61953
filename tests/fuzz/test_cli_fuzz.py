"""Fuzz: hostile arguments to `python -m compactor plan` (run in this process).

Times for `--now` of every shape, unknown or repeated options, options without
their value, unicode. The command exits 0 with a report or 2 with one `error:`
line per problem; never another code, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from compactor import cli
from tests.fuzz import mutations, profiles
from tests.fuzz.test_snapshot_fuzz import small_list

TIMES = st.one_of(
    st.just("2026-11-21T12:00:00Z"),
    st.sampled_from(
        [
            "2026-11-21T12:00:00Z",
            "2026-11-21T12:00:00",
            "2026-11-21",
            "2026-02-30T00:00:00Z",
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00+14:00",
            "2026-11-21T12:00:00.123456789Z",
            "2026-11-21t12:00:00z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T12:00:60Z",
            "+002026-11-21T12:00:00Z",
            "２０２６-11-21T12:00:00Z",
            "now",
            "",
            "1e400",
        ]
    ),
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.text(max_size=30),
)
EXTRA = st.lists(
    st.sampled_from(["--json", "--json", "--now", "--config", "--snapshot", "--dry-run", "-x", "--", "ñ", "--now="]),
    max_size=3,
)


@pytest.fixture(scope="module")
def snapshot_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz-cli") / "snapshot.json"
    path.write_bytes(mutations.encode(small_list(), pretty=True))
    return path


@profiles.fuzz_settings(examples=150)
@given(now=TIMES, extra=EXTRA)
def test_plan_with_hostile_arguments_exits_0_or_2_with_error_lines(
    snapshot_file: Path, now: str, extra: list[str]
) -> None:
    profiles.tried["cli-arguments"] += 1
    arguments = ["plan", "--snapshot", str(snapshot_file), "--now", now, *extra]
    stdout, stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()  # --json writes bytes
    started = time.monotonic()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(arguments)
    stdout.flush()
    event(f"exit {code}")
    assert code in (0, 2), (code, stderr.getvalue())
    if code == 2:
        lines = stderr.getvalue().strip().splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), stderr.getvalue()
    else:
        assert stdout.buffer.getvalue(), "a plan that exits 0 prints its report"
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS
