"""The HTTP face of the HPA floor (`main.hpa_floor`), with the compactor's conventions.

Parameters are read by `compactor.http.parameters` (the path `/` only, only
`dryRun`, a body its Content-Length frames), so both functions accept and
refuse exactly the same requests, before any client is built. Statuses: 200
with the report, 400 bad input or settings, 404 a path other than `/`, 409
another run holds the `node-compactor-hpa` Lease, 413 a body over 16 KiB, 500
a failed run; errors have a JSON body too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from compactor import http as compactor_http
from compactor import logs
from compactor import service as compactor_service
from compactor.errors import CompactorError, http_status
from compactor.hpa import service

log = logging.getLogger(__name__)


def handle(
    request: Any,
    *,
    env: Mapping[str, str] | None = None,
    connector_factory: Callable[[Mapping[str, str]], compactor_service.Connector] | None = None,
    **run_options: Any,
) -> tuple[bytes, int, dict[str, str]]:
    logs.configure()
    env = os.environ if env is None else env
    try:
        params = compactor_http.parameters(request)
        connector = (connector_factory or compactor_service.connector_from)(env)
    except CompactorError as error:
        log.error(
            "bad request: %s",
            error.message,
            extra={"fields": {"event": "run-failed", "job": "hpa-floor", "problems": error.problems}},
        )
        return _error_answer(error)
    try:
        result = service.run(env, connector=connector, force_dry_run=bool(params.dry_run), **run_options)
    except CompactorError as error:
        return _error_answer(error)
    except Exception as error:  # the answer must stay JSON even for a bug
        log.exception(
            "HPA floor run failed unexpectedly", extra={"fields": {"event": "run-failed", "job": "hpa-floor"}}
        )
        return orjson.dumps({"error": f"unexpected error: {type(error).__name__}: {error}"}), 500, compactor_http.JSON
    return orjson.dumps(result.report), 200, compactor_http.JSON


def _error_answer(error: CompactorError) -> tuple[bytes, int, dict[str, str]]:
    body = {"error": error.message, "problems": error.problems}
    return orjson.dumps(body), http_status(error), compactor_http.JSON
