"""A fake Prometheus HTTP API (the instant query endpoint) for the HPA floor's tests, over real HTTP.

`FakePrometheus` runs `ThreadingHTTPServer` on 127.0.0.1 and answers
`GET|POST /api/v1/query` as Prometheus documents it
(https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries):
`{"status": "success", "data": {"resultType": "vector"|"scalar", "result": ...}}`,
sample values as strings ("NaN", "+Inf" included), errors as
`{"status": "error", "errorType": ..., "error": ...}` with 400/422/503.
A query it has no answer for gets an empty vector, as Prometheus answers a
metric that has no series. Every request is recorded with its headers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

SAMPLE_TIME = 1763726400.0


@dataclass(frozen=True)
class Reply:
    """How to answer one query: `values` one per series (a vector); `scalar` answers a scalar instead."""

    values: tuple[str, ...] = ()
    scalar: str | None = None
    status: int = 200
    error_type: str = ""
    error: str = ""
    delay: float = 0.0
    raw: bytes | None = None  # sent as is (with `status`), e.g. an HTML error page
    result_type: str | None = None  # e.g. "matrix" or "string"

    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.error:
            return orjson.dumps({"status": "error", "errorType": self.error_type or "bad_data", "error": self.error})
        if self.result_type is not None:
            return orjson.dumps({"status": "success", "data": {"resultType": self.result_type, "result": []}})
        if self.scalar is not None:
            data: dict[str, Any] = {"resultType": "scalar", "result": [SAMPLE_TIME, self.scalar]}
        else:
            data = {
                "resultType": "vector",
                "result": [
                    {"metric": {"series": str(index)}, "value": [SAMPLE_TIME, value]}
                    for index, value in enumerate(self.values)
                ],
            }
        return orjson.dumps({"status": "success", "data": data})


def value(number: float | str) -> Reply:
    """One series with this value (Prometheus formats it as a string)."""
    return Reply(values=(number if isinstance(number, str) else repr(float(number)),))


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    params: dict[str, str]
    authorization: str | None


@dataclass
class FakePrometheus:
    replies: dict[str, Reply] = field(default_factory=dict)
    _seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def answer(self, query: str, reply: Reply | float) -> None:
        with self._lock:
            self.replies[query] = reply if isinstance(reply, Reply) else value(reply)

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake Prometheus is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._serve(b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._serve(self.rfile.read(length) if length else b"")

            def _serve(self, body: bytes) -> None:
                split = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(split.query).items()}
                if body and self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                    params.update({k: v[0] for k, v in parse_qs(body.decode()).items()})
                query = params.get("query", "")
                with fake._lock:
                    fake._seen.append(Seen(self.command, split.path, query, params, self.headers.get("Authorization")))
                    reply = fake.replies.get(query, Reply())
                if split.path != "/api/v1/query":
                    reply = Reply(status=404, raw=b"404 page not found\n")
                elif not query:
                    reply = Reply(status=400, error_type="bad_data", error='invalid parameter "query": empty')
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json" if reply.raw is None else "text/plain")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    return  # the client gave up waiting (a timeout test)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that closes its kept-alive connection is no error here


@contextmanager
def running() -> Iterator[FakePrometheus]:
    fake = FakePrometheus().start()
    try:
        yield fake
    finally:
        fake.stop()
