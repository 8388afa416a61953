"""The HTTP face of node-compactor (`main.compact`): parameters in, report or error out.

Only `dryRun` is accepted, once, in the query string, a JSON body or a form;
any other parameter is a 400, and so is a value that is not true/false, a
`dryRun` given twice (repeated, or in two places) and a JSON body naming a
key twice. Cloud Scheduler's call, a POST with an empty body, carries no
parameters. Statuses: 200 with the report, 400 bad input or configuration,
409 another run holds the Lease, 413 a body over 16 KiB, 500 a failed run;
errors have a JSON body too.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor import logs, service, strictjson
from compactor.errors import BadInputError, CompactorError, RequestTooLargeError, http_status

log = logging.getLogger(__name__)

JSON = {"Content-Type": "application/json"}


# The one valid body is `{"dryRun": true}`; anything near this size is not a call to this function.
MAX_BODY_BYTES = 16 * 1024


class Parameters(BaseModel):
    # Strict: "yes", "1", "on" or null are not booleans here; only true/false are.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    dry_run: bool = Field(False, alias="dryRun")


def parameters(request: Any) -> Parameters:
    """The request's parameters, or BadInputError naming what is wrong.

    Each parameter may be given once, in one place: a query string that says
    one thing and a body that says another is a question, not an answer.
    """
    if request.method not in ("GET", "POST"):
        raise BadInputError(f"method {request.method} is not allowed; use GET or POST")
    found: list[tuple[str, str, object]] = []  # (name, where, value)
    for key in request.args:
        values = request.args.getlist(key)
        if len(values) > 1:
            raise BadInputError(f"parameter {key!r} is given {len(values)} times")
        found.append((key, "the query string", _boolean_text(values[0])))
    body = _body(request)
    if body.strip():
        found.extend(_body_parameters(request, body))
    given: dict[str, object] = {}
    where_given: dict[str, str] = {}
    for key, where, value in found:
        if key in given:
            raise BadInputError(
                f"parameter {key!r} is given in {where_given[key]} and in {where}; give it once, in one place"
            )
        given[key] = value
        where_given[key] = where
    try:
        return Parameters.model_validate(given)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(p) for p in item['loc']) or 'parameters'}: "
            + ("unknown parameter (only dryRun is accepted)" if item["type"] == "extra_forbidden" else item["msg"])
            for item in error.errors()
        ]
        raise BadInputError("bad request parameters", problems) from None


def _body(request: Any) -> bytes:
    """The body, read no further than MAX_BODY_BYTES (a chunked upload has no Content-Length to trust)."""
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise RequestTooLargeError(_too_large(f"{length} bytes"))
    body: bytes = request.stream.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        raise RequestTooLargeError(_too_large("more"))
    return body


def _too_large(size: str) -> str:
    return (
        f"the request body has {size}; at most {MAX_BODY_BYTES} bytes are accepted "
        '(the body is {"dryRun": true} or empty)'
    )


def _body_parameters(request: Any, body: bytes) -> list[tuple[str, str, object]]:
    if request.mimetype == "application/x-www-form-urlencoded":
        try:
            pairs = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise BadInputError("the form body is not URL-encoded text such as dryRun=true") from None
        counts = Counter(key for key, _ in pairs)
        for key, count in counts.items():
            if count > 1:
                raise BadInputError(f"parameter {key!r} is given {count} times in the form")
        return [(key, "the form", _boolean_text(value)) for key, value in pairs]
    try:
        data = strictjson.loads(body)
    except strictjson.DuplicateKeyError as error:
        raise BadInputError(f"the request body: {error}") from None
    except ValueError:
        raise BadInputError('the request body must be a JSON object such as {"dryRun": true}') from None
    if not isinstance(data, dict):
        raise BadInputError('the request body must be a JSON object such as {"dryRun": true}')
    # JSON has booleans of its own: the text "true" in a JSON body is not one.
    return [(key, "the JSON body", value) for key, value in data.items()]


def _boolean_text(value: str) -> object:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return value  # left for validation to name (a non-boolean dryRun, or an unknown key)


def handle(
    request: Any,
    *,
    env: Mapping[str, str] | None = None,
    connector_factory: Callable[[Mapping[str, str]], service.Connector] | None = None,
    **run_options: Any,
) -> tuple[bytes, int, dict[str, str]]:
    logs.configure()
    env = os.environ if env is None else env
    try:
        params = parameters(request)
        connector = (connector_factory or service.connector_from)(env)
    except CompactorError as error:
        # service.run logs its own failures; these happened before it started.
        log.error(
            "bad request: %s", error.message, extra={"fields": {"event": "run-failed", "problems": error.problems}}
        )
        return _error_answer(error)
    try:
        result = service.run(env, connector=connector, force_dry_run=params.dry_run, **run_options)
    except CompactorError as error:
        return _error_answer(error)
    except Exception as error:  # the answer must stay JSON even for a bug
        log.exception("run failed unexpectedly", extra={"fields": {"event": "run-failed"}})
        return orjson.dumps({"error": f"unexpected error: {type(error).__name__}: {error}"}), 500, JSON
    return orjson.dumps(result.report), 200, JSON


def _error_answer(error: CompactorError) -> tuple[bytes, int, dict[str, str]]:
    body: dict[str, Any] = {"error": error.message, "problems": error.problems}
    if error.report is not None:
        body["report"] = error.report
    return orjson.dumps(body), http_status(error), JSON
