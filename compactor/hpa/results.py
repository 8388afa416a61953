"""Reads the answer of a Prometheus instant query (`/api/v1/query`) into one value or a reason.

Accepted: a scalar, or a vector with exactly one series; the value must be
finite and >= 0. Everything else (an error status, no series, several series,
a matrix or string, NaN, +Inf) is a reason to leave the HPA as it is; estafette
reads `result[0]` whatever the answer holds, and lowers minReplicas on NaN.
Response format: https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from compactor.hpa.model import Answer


def from_body(status: int, body: bytes) -> Answer:
    """An HTTP answer of the query endpoint."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:200].decode("utf-8", "replace").strip()
        return Answer.failed(f"HTTP {status}, not a Prometheus answer: {text!r}")
    if status != 200:
        if isinstance(document, dict) and document.get("error"):
            kind = document.get("errorType") or "error"
            return Answer.failed(f"HTTP {status} {kind}: {document['error']}")
        if isinstance(document, dict) and isinstance(document.get("error"), dict):
            return Answer.failed(f"HTTP {status}: {document['error'].get('message', '')}")
        return Answer.failed(f"HTTP {status}")
    return from_document(document)


def from_document(document: Any) -> Answer:
    """A decoded answer (the JSON object Prometheus sends), or a bare number (the `--metrics` file)."""
    if isinstance(document, bool):
        return Answer.failed("the answer is a boolean, not a number")
    if isinstance(document, int | float):
        return _checked(float(document))
    if not isinstance(document, dict):
        return Answer.failed("the answer is not a Prometheus query response")
    if document.get("status") != "success":
        return Answer.failed(f"query failed: {document.get('errorType') or 'error'}: {document.get('error') or '?'}")
    data = document.get("data")
    if not isinstance(data, dict):
        return Answer.failed("the answer has no data")
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        return _sample(result)
    if kind == "vector":
        if not isinstance(result, list):
            return Answer.failed("the vector answer has no result list")
        if not result:
            return Answer.failed("the query returned no series")
        if len(result) > 1:
            return Answer.failed(
                f"the query returned {len(result)} series; it must return one (aggregate it, e.g. sum)"
            )
        series = result[0]
        return _sample(series.get("value") if isinstance(series, dict) else None)
    return Answer.failed(f"the query returned a {kind or 'unknown'} result; only a scalar or one series is usable")


def _sample(sample: Any) -> Answer:
    if not isinstance(sample, list) or len(sample) != 2 or not isinstance(sample[1], str):
        return Answer.failed('the sample is not [time, "value"]')
    try:
        value = float(sample[1])
    except ValueError:
        return Answer.failed(f"the value {sample[1]!r} is not a number")
    return _checked(value)


def _checked(value: float) -> Answer:
    if math.isnan(value) or math.isinf(value):
        return Answer.failed(f"the query returned {value}, not a finite number")
    if value < 0:
        return Answer.failed(f"the query returned {value:g}, a negative number")
    return Answer(value)
