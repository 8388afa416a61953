"""Reading a Prometheus instant query answer: one finite, non-negative number or a reason."""

from __future__ import annotations

import orjson
import pytest

from compactor.hpa import results
from tests.fakeprometheus import Reply


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(Reply(values=("225.4068155675859",)), 225.4068155675859, id="one-series"),
        pytest.param(Reply(scalar="12"), 12.0, id="scalar"),
        pytest.param(Reply(values=("0",)), 0.0, id="zero"),
        pytest.param(Reply(values=("1e3",)), 1000.0, id="exponent"),
    ],
)
def test_a_usable_answer_gives_its_value(reply: Reply, expected: float) -> None:
    answer = results.from_body(200, reply.body())
    assert answer.problem is None
    assert answer.value == expected


@pytest.mark.parametrize(
    ("status", "reply", "reason"),
    [
        pytest.param(200, Reply(), "no series", id="empty-vector"),
        pytest.param(200, Reply(values=("1", "2")), "2 series", id="multi-series"),
        pytest.param(200, Reply(values=("NaN",)), "not a finite number", id="nan"),
        pytest.param(200, Reply(values=("+Inf",)), "not a finite number", id="plus-inf"),
        pytest.param(200, Reply(scalar="-Inf"), "not a finite number", id="minus-inf-scalar"),
        pytest.param(200, Reply(values=("-3",)), "negative", id="negative"),
        pytest.param(200, Reply(result_type="matrix"), "matrix", id="matrix"),
        pytest.param(200, Reply(result_type="string"), "string", id="string"),
        pytest.param(400, Reply(status=400, error="parse error at char 5"), "bad_data: parse error", id="bad-query"),
        pytest.param(
            503, Reply(status=503, error_type="unavailable", error="overloaded"), "503 unavailable", id="unavailable"
        ),
        pytest.param(502, Reply(status=502, raw=b"<html>Bad Gateway</html>"), "not a Prometheus answer", id="html"),
        pytest.param(200, Reply(raw=b'{"status":"success"}'), "no data", id="no-data"),
        pytest.param(200, Reply(raw=b"[]"), "not a Prometheus query response", id="not-an-object"),
    ],
)
def test_an_unusable_answer_gives_a_reason(status: int, reply: Reply, reason: str) -> None:
    answer = results.from_body(status, reply.body())
    assert answer.value is None
    assert answer.problem is not None
    assert reason in answer.problem


def test_a_google_error_body_is_read() -> None:
    body = orjson.dumps({"error": {"code": 403, "message": "Permission monitoring.timeSeries.list denied"}})
    answer = results.from_body(403, body)
    assert answer.problem is not None
    assert "monitoring.timeSeries.list denied" in answer.problem


@pytest.mark.parametrize(
    ("document", "ok"),
    [
        pytest.param(12.5, True, id="number"),
        pytest.param(3, True, id="integer"),
        pytest.param(True, False, id="boolean"),
        pytest.param("12", False, id="string"),
        pytest.param(-1, False, id="negative"),
    ],
)
def test_a_metrics_file_value_may_be_a_bare_number(document: object, ok: bool) -> None:
    assert (results.from_document(document).value is not None) is ok
