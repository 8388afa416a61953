"""A plain-HTTP proxy on 127.0.0.1 in front of the e2e kube-apiserver, to act at an exact moment of a request.

node-compactor is pointed at the proxy (a kubeconfig with its own token, which the proxy passes
on); before each request is forwarded, the test's `before(request)` runs: it may wait (to keep a
run inside its Lease while another starts) or change the cluster (compact etcd between two pages
of a list). The answer is kube-apiserver's, byte for byte. This is test machinery at the HTTP
level, as tests/fakeapi's request hooks are: the client is never patched.

What it must never do: listen beyond 127.0.0.1, or change a request or an answer.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import urllib3

from tests.e2e.controlplane import ControlPlane, write_kubeconfig

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    status: int = 0

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class ApiProxy:
    plane: ControlPlane
    before: Callable[[Seen], None] = lambda request: None
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def kubeconfig(self, path: Path, *, token: str, user: str) -> Path:
        """A kubeconfig that reaches kube-apiserver through this proxy as `user`."""
        return write_kubeconfig(path, server=self.url, ca=self.plane.ca_path, token=token, user=user)


@contextmanager
def api_proxy(plane: ControlPlane, before: Callable[[Seen], None] | None = None) -> Iterator[ApiProxy]:
    proxy = ApiProxy(plane)
    if before is not None:
        proxy.before = before
    upstream = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(plane.ca_path), maxsize=8)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            parts = urlsplit(self.path)
            request = Seen(self.command, parts.path, parse_qs(parts.query))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            proxy.before(request)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
            answer = upstream.request(
                self.command,
                plane.url + self.path,
                body=body,
                headers=headers,
                preload_content=True,
                decode_content=False,
                redirect=False,
                retries=False,
            )
            with lock:
                proxy.seen.append(Seen(request.method, request.path, request.query, answer.status))
            data = answer.data
            self.send_response(answer.status)
            for key, value in answer.headers.items():
                if key.lower() not in HOP_BY_HOP | {"content-length"}:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward  # noqa: N815 - http.server's names

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="e2e-api-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        upstream.clear()
