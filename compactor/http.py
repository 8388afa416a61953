"""The HTTP face of node-compactor (`main.compact`): parameters in, report or error out.

Only `dryRun` is accepted, in the query string, a JSON body or a form; any
other parameter is a 400, and so is a value that is not true/false. Cloud
Scheduler's call, a POST with an empty body, carries no parameters.
Statuses: 200 with the report, 400 bad input or configuration, 409 another
run holds the Lease, 500 a failed run; errors have a JSON body too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor import logs, service
from compactor.errors import BadInputError, CompactorError, http_status

log = logging.getLogger(__name__)

JSON = {"Content-Type": "application/json"}


class Parameters(BaseModel):
    # Strict: "yes", "1" or "on" are not booleans here; only true/false (any case) are.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    dry_run: bool | None = Field(None, alias="dryRun")


def parameters(request: Any) -> Parameters:
    """The request's parameters, or BadInputError naming what is wrong."""
    if request.method not in ("GET", "POST"):
        raise BadInputError(f"method {request.method} is not allowed; use GET or POST")
    given: dict[str, object] = {}
    for key in request.args:
        values = request.args.getlist(key)
        if len(values) > 1:
            raise BadInputError(f"parameter {key!r} is given {len(values)} times")
        given[key] = _boolean_text(key, values[0])
    body = request.get_data(cache=True) or b""
    if body.strip():
        given.update(_body_parameters(request, body))
    try:
        return Parameters.model_validate(given)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(p) for p in item['loc']) or 'parameters'}: "
            + ("unknown parameter (only dryRun is accepted)" if item["type"] == "extra_forbidden" else item["msg"])
            for item in error.errors()
        ]
        raise BadInputError("bad request parameters", problems) from None


def _body_parameters(request: Any, body: bytes) -> dict[str, object]:
    if request.mimetype == "application/x-www-form-urlencoded":
        return {key: _boolean_text(key, value) for key, value in request.form.items()}
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadInputError('the request body must be a JSON object such as {"dryRun": true}') from None
    if not isinstance(data, dict):
        raise BadInputError('the request body must be a JSON object such as {"dryRun": true}')
    return {key: _boolean_text(key, value) if isinstance(value, str) else value for key, value in data.items()}


def _boolean_text(key: str, value: str) -> object:
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
        result = service.run(env, connector=connector, force_dry_run=bool(params.dry_run), **run_options)
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
