"""Odd but well-formed input: times at the edge of the calendar, JSON that names a key twice, endless files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from compactor.core import timing
from compactor.errors import ConfigError
from compactor.settings import config, strictjson


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("9999-12-31T23:59:59-23:59", id="past-year-9999-in-utc"),
        pytest.param("0001-01-01T00:00:00+01:00", id="before-year-1-in-utc"),
        pytest.param("0001-01-01T00:00:00+14:00", id="before-year-1-far-east"),
    ],
)
def test_a_time_outside_the_calendar_once_in_utc_is_out_of_range_not_an_overflow(text: str) -> None:
    with pytest.raises(timing.OutOfRangeError, match="outside the years 1 to 9999"):
        timing.parse_rfc3339(text)
    assert timing.parse_stamp(text) is None, "an annotation with such a time is unreadable"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("9999-12-31T23:59:59Z", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), id="last-second"),
        pytest.param("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC), id="first-second"),
        pytest.param("2026-11-21T12:00:00+01:00", datetime(2026, 11, 21, 11, tzinfo=UTC), id="offset"),
    ],
)
def test_times_at_the_edges_of_the_calendar_still_parse(text: str, expected: datetime) -> None:
    assert timing.parse_rfc3339(text) == expected


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param('{"dryRun": true, "dryRun": false}', "dryRun", id="top-level"),
        pytest.param('{"nodePools": {"p": {"enabled": false, "enabled": true}}}', "enabled", id="nested"),
        pytest.param('[{"a": 1}, {"b": 1, "b": 2}]', "b", id="in-a-list"),
    ],
)
def test_json_naming_a_key_twice_is_an_error_naming_the_key(text: str, key: str) -> None:
    with pytest.raises(strictjson.DuplicateKeyError) as raised:
        strictjson.loads(text)
    assert raised.value.key == key and repr(key) in str(raised.value)


def test_the_same_key_in_two_different_objects_is_fine() -> None:
    assert strictjson.loads('{"a": {"x": 1}, "b": {"x": 2}}') == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("NaN", id="nan"),
        pytest.param('{"a": Infinity}', id="infinity"),
        pytest.param("[" * 5000 + "]" * 5000, id="nested-too-deeply"),
        pytest.param("{", id="truncated"),
    ],
)
def test_text_that_is_not_plain_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the contract is exactly "a ValueError, nothing else"
        strictjson.loads(text)


DUPLICATE_DRY_RUN = '{"dryRun": true, "nodePools": {}, "dryRun": false}'


def firestore_text(_document: str, _database: str | None) -> str:
    return DUPLICATE_DRY_RUN


@pytest.mark.parametrize(
    ("env", "use_file", "firestore"),
    [
        pytest.param({config.ENV_CONFIG: DUPLICATE_DRY_RUN}, False, None, id="environment"),
        pytest.param({}, True, None, id="config-file"),
        pytest.param({config.ENV_FIRESTORE_DOCUMENT: "c/d"}, False, firestore_text, id="firestore-config-field"),
    ],
)
def test_a_configuration_naming_a_key_twice_is_refused_from_every_text_source(
    tmp_path: Path, env: dict[str, str], use_file: bool, firestore: config.FirestoreReader | None
) -> None:
    path = tmp_path / "config.json"
    path.write_text(DUPLICATE_DRY_RUN)
    config_file = str(path) if use_file else None
    with pytest.raises(ConfigError, match="'dryRun' is given twice"):
        config.load(env, config_file=config_file, read_firestore=firestore)


def test_an_endless_config_file_is_refused_after_a_bounded_read() -> None:
    with pytest.raises(ConfigError, match="larger than 1024 KiB"):
        config.load({}, config_file="/dev/zero")


def test_a_config_file_at_the_size_limit_still_loads(tmp_path: Path) -> None:
    text = json.dumps({"poolLabel": "x" * (config.MAX_FILE_BYTES - 20)})
    path = tmp_path / "big.json"
    path.write_text(text)
    assert len(text) <= config.MAX_FILE_BYTES
    assert config.load({}, config_file=str(path)).pool_label.startswith("x")
