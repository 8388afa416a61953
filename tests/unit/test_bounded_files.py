"""Files handed to the command line are read with a bound: a device or a wrong huge file ends at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compactor import cli
from compactor.errors import BadInputError
from compactor.settings import jsonfiles

EXAMPLE = "examples/offpeak-snapshot.json"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["hpa", "--snapshot", "/dev/zero"], id="hpa-snapshot"),
        pytest.param(["hpa", "--snapshot", EXAMPLE, "--metrics", "/dev/zero"], id="hpa-metrics"),
        pytest.param(["simulate", "--snapshot", "/dev/zero", "--hours", "1"], id="simulate-snapshot"),
    ],
)
def test_an_endless_file_is_refused_at_once(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert cli.main(argv) == 2
    assert "/dev/zero is larger than" in capsys.readouterr().err
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"{not json", "metrics file {path} is not JSON", id="not-json"),
        pytest.param(b"[1, 2]", "metrics file {path} must be a JSON object", id="array"),
        pytest.param(b"x" * 2048, "metrics file {path} is larger than 1024 bytes", id="too-large"),
    ],
)
def test_a_bad_file_is_named_with_what_is_wrong(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(content)
    with pytest.raises(BadInputError) as raised:
        jsonfiles.read_object(str(path), what="metrics file", limit=1024, error=BadInputError)
    assert message.format(path=path) in raised.value.message


def test_a_missing_file_is_named() -> None:
    with pytest.raises(BadInputError, match=r"cannot read snapshot /nonexistent\.json: No such file"):
        jsonfiles.read_object("/nonexistent.json", what="snapshot", limit=1 << 20, error=BadInputError)
