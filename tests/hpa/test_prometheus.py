"""The Prometheus adapter against a fake Prometheus over real HTTP: answers, failures, timeouts, the token."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from compactor.hpa import prometheus
from compactor.hpa.model import Answer, Query
from tests.fakeprometheus import FakePrometheus, Reply, running

RATE = "sum(rate(http_requests_total[5m]))"


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with running() as fake:
        yield fake


def test_an_instant_query_is_sent_with_its_text_and_a_timeout(prom: FakePrometheus) -> None:
    prom.answer(RATE, 42.5)
    answers = prometheus.Querier(prom.url).run([Query(None, RATE)])
    assert answers[Query(None, RATE)].value == 42.5
    [seen] = prom.seen
    assert (seen.method, seen.path, seen.query) == ("GET", "/api/v1/query", RATE)
    assert seen.params["timeout"] == "10s"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param(Reply(status=422, error_type="execution", error="too many samples"), "execution", id="error"),
        pytest.param(Reply(), "no series", id="empty"),
        pytest.param(Reply(values=("1", "2", "3")), "3 series", id="multi-series"),
        pytest.param(Reply(values=("NaN",)), "finite", id="nan"),
        pytest.param(Reply(scalar="+Inf"), "finite", id="inf"),
    ],
)
def test_an_unusable_answer_becomes_a_reason_not_an_exception(prom: FakePrometheus, reply: Reply, reason: str) -> None:
    prom.answer(RATE, reply)
    answer = prometheus.Querier(prom.url).run([Query(None, RATE)])[Query(None, RATE)]
    assert answer.value is None
    assert answer.problem is not None
    assert reason in answer.problem


def test_a_slow_query_times_out_within_its_bound(prom: FakePrometheus) -> None:
    prom.answer(RATE, Reply(values=("1",), delay=2.0))
    started = time.monotonic()
    answer = prometheus.Querier(prom.url, timeout=0.6).run([Query(None, RATE)])[Query(None, RATE)]
    assert time.monotonic() - started < 1.8
    assert answer.problem is not None
    assert "timed out" in answer.problem


def test_an_unreachable_server_becomes_a_reason() -> None:
    with running() as fake:
        url = fake.url
    answer = prometheus.Querier(url).run([Query(None, RATE)])[Query(None, RATE)]
    assert answer.problem is not None
    assert "cannot reach" in answer.problem


def test_an_unreachable_servers_password_is_never_in_the_reason() -> None:
    # The reason goes into the report and a Warning Event on the HPA, which anyone who reads Events sees.
    with running() as fake:
        url = fake.url.replace("http://", "http://reader:s3cr3t-pw@")
    answer = prometheus.Querier(url).run([Query(None, RATE)])[Query(None, RATE)]
    assert answer.problem is not None
    assert answer.problem.startswith(f"cannot reach 127.0.0.1:{url.rsplit(':', 1)[1]}")
    assert "s3cr3t-pw" not in answer.problem and "reader" not in answer.problem


def test_no_query_is_sent_once_the_deadline_has_passed(prom: FakePrometheus) -> None:
    querier = prometheus.Querier(prom.url, deadline=100.0, monotonic=lambda: 100.0)
    answer = querier.run([Query(None, RATE)])[Query(None, RATE)]
    assert answer.problem is not None
    assert "time budget" in answer.problem
    assert prom.seen == []


def test_queries_run_concurrently_but_never_more_than_the_bound(prom: FakePrometheus) -> None:
    in_flight = 0
    most = 0
    lock = threading.Lock()
    original = prometheus.Querier.one

    class Counting(prometheus.Querier):
        def one(self, query: Query) -> Answer:
            nonlocal in_flight, most
            with lock:
                in_flight += 1
                most = max(most, in_flight)
            try:
                return original(self, query)
            finally:
                with lock:
                    in_flight -= 1

    queries = [Query(None, f"q{i}") for i in range(12)]
    for query in queries:
        prom.answer(query.query, Reply(values=("1",), delay=0.2))
    started = time.monotonic()
    answers = Counting(prom.url, concurrency=4).run(queries)
    elapsed = time.monotonic() - started
    assert all(answer.value == 1.0 for answer in answers.values())
    assert most == 4
    assert elapsed < 12 * 0.2  # not one after the other


def test_the_google_token_goes_only_to_monitoring_googleapis_com(prom: FakePrometheus) -> None:
    issued: list[str] = []

    def token() -> str:
        issued.append("token")
        return "google-secret"

    prom.answer(RATE, 3.0)
    querier = prometheus.Querier(prometheus.managed_prometheus_url("p"), token_source=token)
    answers = querier.run([Query(prom.url, RATE)])  # an allowlisted per-HPA server
    assert answers[Query(prom.url, RATE)].value == 3.0
    assert [seen.authorization for seen in prom.seen] == [None]
    assert issued == []


@pytest.mark.parametrize(
    ("url", "google"),
    [
        pytest.param("https://monitoring.googleapis.com/v1/projects/p/location/global/prometheus", True, id="gmp"),
        pytest.param("http://monitoring.googleapis.com/v1/projects/p", False, id="plain-http"),
        pytest.param("https://monitoring.googleapis.com.evil.example/v1", False, id="suffix"),
        pytest.param("https://monitoring.googleapis.com:8443/v1", False, id="other-port"),
        pytest.param("https://evil.example/monitoring.googleapis.com", False, id="in-path"),
    ],
)
def test_only_the_google_monitoring_host_counts_as_google(url: str, google: bool) -> None:
    assert prometheus.is_google(url) is google


def test_the_managed_prometheus_url_is_the_projects_query_api() -> None:
    assert (
        prometheus.managed_prometheus_url("my-project")
        == "https://monitoring.googleapis.com/v1/projects/my-project/location/global/prometheus"
    )
