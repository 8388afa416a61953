"""The HTTP face of node-compactor (`main.compact`): parameters in, report or error out.

Only the path `/` is served: any other path (`/dryRun=true`, `/%3FdryRun=true`,
`//`, `/dry-run`) is a 404 before anything else is looked at, so a caller
who put the parameter in the wrong place never gets a real run. Only `dryRun`
is accepted, once, in the query string, a JSON body or a form; any other
parameter is a 400, and so is a value that is not true/false, a `dryRun`
given twice (repeated, or in two places), a JSON body naming a key twice,
and a body that disagrees with its Content-Length (shorter, or followed by
bytes the header does not count, such as `Content-Length: 0` carrying
`{"dryRun": true}`). Cloud Scheduler's call, a POST with an empty body,
carries no parameters. Statuses: 200 with the report, 400 bad input or
configuration, 404 another path, 409 another run holds the Lease, 413 a
body over 16 KiB, 500 a failed run; errors have a JSON body too.

Nothing here may build a client or touch the cluster: every refusal happens
before `handle` asks for a connection.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import select
import socket
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor import logs, service
from compactor.errors import BadInputError, CompactorError, PathNotFoundError, RequestTooLargeError, http_status
from compactor.settings import strictjson

log = logging.getLogger(__name__)

JSON = {"Content-Type": "application/json"}


# The one valid body is `{"dryRun": true}`; anything near this size is not a call to this function.
MAX_BODY_BYTES = 16 * 1024
# How long to watch the connection for bytes after the declared body. A client that writes its
# headers and its body in two writes has both on a loopback or LAN connection well within this;
# a caller that waits for the answer before sending more (every real HTTP client) costs 50 ms.
TRAILING_BYTES_WAIT_SECONDS = 0.05
# Bytes after the body that start another request: HTTP/1.1 pipelining, not a body the header forgot.
_NEXT_REQUEST = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ (/|\*|https?://)")


class Parameters(BaseModel):
    # Strict: "yes", "1", "on" or null are not booleans here; only true/false are.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    dry_run: bool = Field(False, alias="dryRun")


def parameters(request: Any) -> Parameters:
    """The request's parameters, or BadInputError naming what is wrong.

    Each parameter may be given once, in one place: a query string that says
    one thing and a body that says another is a question, not an answer.
    """
    _check_path(request.environ)
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


def _check_path(environ: Mapping[str, Any]) -> None:
    """PathNotFoundError unless the request is for `/` exactly, as the client wrote it.

    PATH_INFO is the decoded path (`/%3FdryRun=true` arrives as `/?dryRun=true`,
    `/%2F` as `//`); werkzeug's `request.path` would turn `//` into `/`, so it is not
    used. The raw request target (gunicorn's RAW_URI, the test client's
    REQUEST_URI) is checked too: `/#?dryRun=true` has the PATH_INFO `/` and an
    empty query string, and must not run for real either.
    """
    path = environ.get("PATH_INFO", "")
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if path == "/" and (not isinstance(raw, str) or _is_root_target(raw)):
        return
    shown = raw if isinstance(raw, str) and raw else path
    raise PathNotFoundError(
        f"no such path {shown[:200]!r}: the function answers on / only "
        '(a dry run is /?dryRun=true or a POST to / with the JSON body {"dryRun": true})'
    )


def _is_root_target(raw: str) -> bool:
    if "#" in raw:  # a fragment is never part of a request target (RFC 9112, section 3.2)
        return False
    target = raw.partition("?")[0]
    if target == "/":
        return True
    # The absolute form a proxy may send (http://host/?dryRun=true): only its path counts.
    split = urllib.parse.urlsplit(target)
    return split.scheme in ("http", "https") and bool(split.netloc) and split.path == "/"


def _body(request: Any) -> bytes:
    """The body, read no further than MAX_BODY_BYTES, and only when it agrees with its Content-Length.

    A chunked upload has no Content-Length to trust, so the reading itself is bounded.
    A body shorter than its Content-Length, or bytes after the body that the header
    does not count, mean the caller's body is not the one the server framed: acting
    on the framed one (empty: a real run) would ignore what the caller wrote.
    """
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise RequestTooLargeError(_too_large(f"{length} bytes"))
    stream = request.stream
    body = b""
    try:
        # One read may return less than asked (werkzeug's LimitedStream reads once): read to the end.
        while len(body) <= MAX_BODY_BYTES:
            chunk = stream.read(MAX_BODY_BYTES + 1 - len(body))
            if not chunk:
                break
            body += chunk
    except Exception as error:  # werkzeug's ClientDisconnected, gunicorn's bad chunk framing, a reset
        # functions-framework reads the body again after the answer is made; reading a broken
        # stream would raise once more and turn this 400 into a 500.
        with contextlib.suppress(AttributeError):
            request.stream = io.BytesIO()
        raise BadInputError(
            f"the request body could not be read ({type(error).__name__}): "
            f"it is shorter than its Content-Length ({length} bytes) or was cut off"
        ) from None
    if len(body) > MAX_BODY_BYTES:
        raise RequestTooLargeError(_too_large("more"))
    if length is not None and len(body) != length:
        raise BadInputError(
            f"the request body has {len(body)} bytes but its Content-Length says {length}; "
            "send the body with a Content-Length that counts it"
        )
    # Empty lines before a request line are allowed (RFC 9112, section 2.2): not a body.
    trailing = _bytes_after_body(request.environ).lstrip(b"\r\n")
    if trailing and not _NEXT_REQUEST.match(trailing):
        declared = "no Content-Length" if length is None else f"Content-Length: {length}"
        raise BadInputError(
            f"bytes follow the request body that its {declared} does not count "
            f"(they start {trailing[:16]!r}); send the body with a Content-Length that counts it"
        )
    return body


def _bytes_after_body(environ: Mapping[str, Any]) -> bytes:
    """Up to 64 bytes the client sent after the body its headers declare, where the server lets us see them.

    A WSGI application is handed the framed body only; what follows it is, for the
    server, the start of the next request. Three places show it without taking it:
    an in-memory input (functions-framework's test client) holds everything sent;
    gunicorn (what functions-framework serves with) keeps what it read past the
    body in its parser's buffer, and the rest is still in the socket, where a peek
    finds it. Behind Cloud Run's front end the container only ever receives
    requests the front end framed itself, so this finds nothing there.
    """
    stream = environ.get("wsgi.input")
    if isinstance(stream, io.BytesIO):
        return stream.getvalue()[stream.tell() : stream.tell() + 64]
    buffered = getattr(getattr(getattr(stream, "reader", None), "unreader", None), "buf", None)
    if isinstance(buffered, io.BytesIO) and buffered.getvalue():
        return buffered.getvalue()[:64]
    connection = environ.get("gunicorn.socket")
    if not isinstance(connection, socket.socket):
        return b""
    try:
        readable, _, _ = select.select([connection], [], [], TRAILING_BYTES_WAIT_SECONDS)
        return connection.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT) if readable else b""
    except (OSError, ValueError):
        return b""  # a closed connection sends nothing more


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
