"""Fuzz: hostile calls of `main.compact` through functions-framework's test client.

Methods, query strings (unknown, repeated, empty or unicode parameters), content
types and bodies (JSON of every shape, keys given twice, escapes, forms, binary,
bodies over the 16 KiB limit). The function runs against the fake API server with
`"dryRun": true` in its configuration, so even an accepted call writes nothing.
Property: 200 with the report, 400 with a JSON error naming the problem, or 413 for
an oversized body; never another status, never a write, never a request to the
cluster for a refused call, never longer than the time bound.
"""

from __future__ import annotations

import http.client as http_client
import io
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from compactor import http
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.fuzz import mutations, profiles
from tests.integration import function_server

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "fuzz-token"
CONFIG = {
    "nodePools": {"default-pool": {"enabled": True, "scaleDownCPURequestRatioLimit": 0.75}},
    "dryRun": True,  # an accepted call plans and answers, and writes nothing
}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "PROPFIND"]
CONTENT_TYPES = [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "text/plain",
    "application/octet-stream",
    "application/xml",
    "",
]
NAMES = ["dryRun", "dryrun", "DryRun", "dry_run", "force", "", " ", "dryRun ", "dryRun[]", "ñ", "🚀", "a\u0000b"]
VALUES = ["true", "false", "TRUE", " false ", "1", "0", "yes", "", "null", "tru", "ｔｒｕｅ", "\u202etrue", "x" * 3000]


@dataclass(frozen=True)
class Call:
    method: str
    query: tuple[tuple[str, str], ...]
    content_type: str | None
    body: bytes
    chunked: bool = False  # sent without Content-Length, as a chunked upload arrives

    def __repr__(self) -> str:  # the body may be a megabyte: show its size and start
        return (
            f"Call({self.method}, query={self.query!r:.200}, content_type={self.content_type!r}, "
            f"body={len(self.body)} bytes {self.body[:80]!r}, chunked={self.chunked})"
        )


def json_bodies() -> st.SearchStrategy[bytes]:
    values = st.one_of(mutations.hostile_values(), st.sampled_from([True, False]))
    objects = st.dictionaries(st.sampled_from(NAMES), values, max_size=3)
    return st.one_of(
        objects.map(lambda value: json.dumps(value).encode()),
        values.map(lambda value: json.dumps(value).encode()),
        st.sampled_from(
            [
                b'{"dryRun": true, "dryRun": false}',
                b'{"dryRun": true, "dryRun": true}',
                b'{"dryRun": "\\ud800"}',
                b'{"\\ud800": true}',
                b'{"\\u0000": true}',
                b'{"dryRun": tru',
                b'{"dryRun": NaN}',
                b'{"dryRun": 1e400}',
                b'{"dryRun": true}' + b" " * 20_000,
                b"[" * 5_000 + b"]" * 5_000,
                b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
                b"\xef\xbb\xbf" + b'{"dryRun": true}',  # a byte order mark
                b'{"dryRun": true}\x00',
                '{"dryRun": true, "ñ": 1}'.encode("latin-1"),
            ]
        ),
    )


def form_bodies() -> st.SearchStrategy[bytes]:
    pairs = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=3)
    return st.one_of(
        pairs.map(lambda items: urlencode(items).encode()),
        st.sampled_from([b"dryRun", b"=true", b"dryRun=%ZZ", b"dryRun=true&&", b"dryRun=%FF", b"a=1;b=2"]),
    )


def oversized_bodies() -> st.SearchStrategy[bytes]:
    sizes = st.sampled_from([http.MAX_BODY_BYTES + 1, 100_000, 1 << 20])
    fillers = st.sampled_from([b"{", b" ", b"a", b"\x00"])
    return st.tuples(sizes, fillers).map(lambda pair: b'{"dryRun": true}' + pair[1] * pair[0])


def valid_calls() -> st.SearchStrategy[tuple[tuple[tuple[str, str], ...], str | None, bytes]]:
    """(query, content type, body) of a call the contract accepts: dryRun once, in one place, or nothing."""
    flag = st.sampled_from(["true", "false", "TRUE", "False"])
    return st.one_of(
        st.just(((), None, b"")),
        st.just(((), "application/octet-stream", b"")),
        flag.map(lambda value: ((("dryRun", value),), None, b"")),
        st.booleans().map(lambda value: ((), "application/json", json.dumps({"dryRun": value}).encode())),
        flag.map(lambda value: ((), "application/x-www-form-urlencoded", f"dryRun={value}".encode())),
    )


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, Call]:
    """(what the contract expects, the call)."""
    shape = draw(st.sampled_from(["valid", "query", "body", "body", "oversized", "method"]))
    chunked = draw(st.booleans())
    method = draw(st.sampled_from(METHODS[2:] if shape == "method" else METHODS[:2]))
    if shape == "valid":
        query, content_type, body = draw(valid_calls())
        return "200", Call(method, query, content_type, body, chunked)
    names = st.sampled_from(NAMES)
    query = tuple(draw(st.lists(st.tuples(names, st.sampled_from(VALUES)), min_size=shape == "query", max_size=3)))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if shape == "oversized":
        body = draw(oversized_bodies())
    elif shape == "body":
        body = draw(st.one_of(json_bodies(), form_bodies(), st.binary(min_size=1, max_size=64)))
    else:
        body = draw(st.one_of(st.just(b""), json_bodies()))
    return shape, Call(method, query, content_type, body, chunked)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add(k8s.node("n1", annotations={"node-compactor.dev/underutilized-since": "2026-11-21T11:00:00Z"}))
        server.add(k8s.node("n2"))
        server.add(k8s.pod("web-1", node="n1", cpu="300m"))
        server.add(k8s.pod("busy-2", node="n2", cpu="3"))
        kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("fuzz-http") / "kubeconfig")
        with pytest.MonkeyPatch.context() as patch:
            for variable in ("COMPACTOR_CLUSTER", "COMPACTOR_FIRESTORE_DOCUMENT", "KUBERNETES_SERVICE_HOST"):
                patch.delenv(variable, raising=False)
            patch.setenv("KUBECONFIG", str(kubeconfig))
            patch.setenv("COMPACTOR_CONFIG", json.dumps(CONFIG))
            patch.setenv("COMPACTOR_RUN_BUDGET_SECONDS", "60")
            yield server


@pytest.fixture(scope="module")
def client(api: FakeApiServer) -> Any:
    import functions_framework

    app = functions_framework.create_app(target="compact", source=str(ROOT / "main.py"))  # type: ignore[no-untyped-call]
    return app.test_client()


def expected_refusal(call: Call) -> int | None:
    """What must refuse the call before its body is even parsed; None when the body decides."""
    if call.method not in ("GET", "POST"):
        return 400
    names = [name for name, _ in call.query]
    if len(names) != len(set(names)):
        return 400
    if len(call.body) > http.MAX_BODY_BYTES:
        return 413
    return None


def assert_a_readable_error(response: Any, call: Call) -> None:
    assert response.headers["Content-Type"] == "application/json", call
    if call.method == "HEAD":
        return  # the answer to HEAD has the headers of the GET answer and no body
    answer = json.loads(response.get_data())
    assert isinstance(answer.get("error"), str) and answer["error"].strip(), answer
    problems = answer.get("problems")
    assert isinstance(problems, list) and problems and all(isinstance(p, str) and p.strip() for p in problems)
    assert "Traceback" not in answer["error"]


@profiles.fuzz_settings(examples=400)
@given(case=calls())
def test_a_hostile_call_answers_200_400_or_413_and_writes_nothing(
    case: tuple[str, Call], client: Any, api: FakeApiServer
) -> None:
    shape, call = case
    profiles.tried["http"] += 1
    api.reset_counters()
    options: dict[str, Any] = {"method": call.method, "query_string": urlencode(call.query)}
    if call.chunked:
        # No Content-Length to trust: the WSGI server marks the stream as ending by itself.
        options["input_stream"] = io.BytesIO(call.body)
        options["environ_overrides"] = {"wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
    else:
        options["data"] = call.body
    if call.content_type is not None:
        options["content_type"] = call.content_type
    started = time.monotonic()
    response = client.open("/", **options)
    elapsed = time.monotonic() - started
    event(f"{shape}: {response.status_code}")
    refusal = expected_refusal(call)
    if shape == "valid":
        assert response.status_code == 200, (response.get_data()[:300], call)
    if call.method == "OPTIONS" and response.status_code == 200:
        # Flask answers OPTIONS itself with the allowed methods; the function never runs.
        assert api.requests == []
    elif refusal is not None:
        assert response.status_code == refusal, (response.status_code, response.get_data()[:300], call)
        assert_a_readable_error(response, call)
    else:
        assert response.status_code in (200, 400), (response.status_code, response.get_data()[:300], call)
        if response.status_code == 400:
            assert_a_readable_error(response, call)
        else:
            assert json.loads(response.get_data())["dryRun"] is True
            assert {name for name, _ in call.query} <= {"dryRun"}, "a call with an unknown parameter was accepted"
    if response.status_code != 200:
        assert api.requests == [], f"a refused call reached the cluster: {call}"
    assert api.writes == [], f"a call wrote to the cluster: {call}"
    assert elapsed < profiles.TIME_BOUND_SECONDS, f"{call} took {elapsed:.1f} s"


# -- paths other than / ---------------------------------------------------------------------------
#
# A caller who writes the parameter into the path (`/dryRun=true`, `/%3FdryRun=true`) meant a dry
# run; running for real would be the worst answer. The configuration of this module forces dry
# runs, so what is checked is that such a call never reaches the cluster at all.

TRICKY_PATHS = [
    "/dryRun=true",
    "/%3FdryRun=true",
    "/%3fdryRun=true",
    "/dry-run",
    "/dryRun/true",
    "/%2F",
    "/%2f?dryRun=true",
    "/;dryRun=true",
    "/compact",
    "/./",
    "/../",
    "/%00",
    "/%C0%AF",
    "/ ",
    "/%20",
    "/index.html",
    "/?/..",
]


def paths() -> st.SearchStrategy[str]:
    text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=24)
    escaped = text.map(lambda value: "/" + quote(value, safe="/;=&%"))
    return st.one_of(st.sampled_from(TRICKY_PATHS), escaped).filter(lambda path: path.split("?")[0] != "/")


@profiles.fuzz_settings(examples=200)
@given(
    path=paths(), method=st.sampled_from(["GET", "POST"]), query=st.sampled_from(["", "dryRun=true", "dryRun=false"])
)
def test_a_call_on_another_path_never_reaches_the_cluster(
    path: str, method: str, query: str, client: Any, api: FakeApiServer
) -> None:
    profiles.tried["http-path"] += 1
    api.reset_counters()
    target = f"{path}{'&' if '?' in path else '?'}{query}" if query else path
    response = client.open(target, method=method)
    event(f"path: {response.status_code}")
    if response.status_code == 404 and response.headers["Content-Type"] == "application/json":
        assert "answers on / only" in json.loads(response.get_data())["error"]
    else:
        # werkzeug's router answers some paths itself: 308 to merge slashes or drop dot segments,
        # functions-framework 404s /robots.txt and /favicon.ico; the function never runs.
        assert response.status_code in (308, 404), (response.status_code, path)
    assert api.requests == [], f"{method} {target} reached the cluster"
    assert api.writes == []


# -- chunked uploads through a real functions-framework process ----------------------------------
#
# The test client above marks a chunked stream by hand; here a real server reads one. A chunked
# {"dryRun": true} that went unread would make the call act for real: the configuration of this
# process does not force dry runs, so such a call would write, and the test would see it.


@pytest.fixture(scope="module")
def function_process(api: FakeApiServer) -> Iterator[int]:
    acting = {**CONFIG, "dryRun": False}
    with function_server.serve("compact", {**os.environ, "COMPACTOR_CONFIG": json.dumps(acting)}) as url:
        yield int(url.rstrip("/").rsplit(":", 1)[1])


def post_chunked(port: int, body: bytes) -> tuple[int, bytes]:
    connection = http_client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest("POST", "/")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        for start in range(0, len(body), 4096):
            chunk = body[start : start + 4096]
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        pytest.param(b'{"dryRun": true}', 200, '"dryRun":true', id="dry-run-honoured"),
        pytest.param(b'{"dryRun": "maybe"}', 400, "valid boolean", id="not-a-boolean"),
        pytest.param(b'{"dryRun": true, "dryRun": false}', 400, "twice", id="given-twice"),
        pytest.param(b'{"dryRun": true}' + b" " * (1 << 20), 413, "at most 16384 bytes", id="a-megabyte"),
    ],
)
def test_a_chunked_body_is_read_and_bounded_by_a_real_server(
    function_process: int, api: FakeApiServer, body: bytes, status: int, words: str
) -> None:
    profiles.tried["http"] += 1
    api.reset_counters()
    started = time.monotonic()
    answer_status, answer = post_chunked(function_process, body)
    assert answer_status == status, answer[:300]
    assert words in answer.decode(), answer[:300]
    assert api.writes == [], "a chunked call wrote to the cluster"
    assert time.monotonic() - started < profiles.TIME_BOUND_SECONDS
