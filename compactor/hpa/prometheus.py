"""The HPA floor's Prometheus adapter: instant queries, concurrent with a bound, each with a timeout.

The default endpoint is Google Cloud Managed Service for Prometheus, the
project's Prometheus-compatible API
(`https://monitoring.googleapis.com/v1/projects/P/location/global/prometheus/api/v1/query`,
https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.location.prometheus.api.v1/query),
or any Prometheus HTTP API at `PROMETHEUS_SERVER_URL`.

The Google access token (scope monitoring.read) is sent to
`https://monitoring.googleapis.com` and nowhere else, whatever URL a setting
or an annotation names. A query that fails, times out or cannot be read
becomes an `Answer` with its reason, never an exception: the planner then
leaves that HPA as it is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode, urlsplit

import urllib3

from compactor.errors import ClusterAccessError
from compactor.hpa import results
from compactor.hpa.model import Answer, Query

GOOGLE_HOST = "monitoring.googleapis.com"
MONITORING_READ_SCOPE = "https://www.googleapis.com/auth/monitoring.read"
QUERY_PATH = "/api/v1/query"
CONNECT_TIMEOUT = 3.0
QUERY_TIMEOUT = 10.0  # per query; Prometheus is also told, so it gives up on its side too
CONCURRENCY = 8
MAX_ANSWER_BYTES = 1 << 20  # an instant query of one series is a few hundred bytes

TokenSource = Callable[[], str]


def managed_prometheus_url(project: str) -> str:
    return f"https://{GOOGLE_HOST}/v1/projects/{project}/location/global/prometheus"


def _host(url: str) -> str:
    """host[:port] of a URL, for messages: never its user info, which can be a password."""
    split = urlsplit(url)
    return f"{split.hostname}:{split.port}" if split.port is not None else split.hostname or "the server"


def is_google(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and (parts.hostname or "").lower() == GOOGLE_HOST and parts.port in (None, 443)


def google_token_source() -> TokenSource:
    """Application-default credentials narrowed to monitoring.read, found on first use, refreshed when they expire.

    Failing to find or refresh them fails the queries that need them (ClusterAccessError), never the run.
    """
    import google.auth
    import google.auth.credentials
    import google.auth.exceptions
    import google.auth.transport.requests

    lock = threading.Lock()
    found: list[google.auth.credentials.Credentials] = []

    def token() -> str:
        with lock:
            if not found:
                try:
                    credentials, _project = google.auth.default(scopes=[MONITORING_READ_SCOPE])
                except google.auth.exceptions.DefaultCredentialsError as error:
                    raise ClusterAccessError(
                        f"cannot find Google credentials to query Managed Prometheus: {error}"
                    ) from error
                found.append(credentials)
            credentials = found[0]
            if not credentials.valid:
                try:
                    credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
                except google.auth.exceptions.GoogleAuthError as error:
                    raise ClusterAccessError(f"cannot get a Google token for Managed Prometheus: {error}") from error
            return str(credentials.token)

    return token


class Querier:
    """Runs instant queries against `default_url` (for `Query.server` None) or the query's own server.

    `default_url` None: no default endpoint is known, and `no_default` says why in each answer that needed one.
    """

    def __init__(
        self,
        default_url: str | None,
        *,
        token_source: TokenSource | None = None,
        timeout: float = QUERY_TIMEOUT,
        concurrency: int = CONCURRENCY,
        deadline: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        no_default: str = "no default Prometheus endpoint",
    ) -> None:
        self.default_url = None if default_url is None else default_url.rstrip("/")
        self.no_default = no_default
        self.token_source = token_source
        self.timeout = timeout
        self.concurrency = concurrency
        self.deadline = deadline
        self.monotonic = monotonic
        self.http = urllib3.PoolManager(maxsize=concurrency, retries=False)

    def run(self, queries: Sequence[Query]) -> dict[Query, Answer]:
        if not queries:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(queries)), thread_name_prefix="query") as pool:
            answers = list(pool.map(self.one, queries))
        return dict(zip(queries, answers, strict=True))

    def one(self, query: Query) -> Answer:
        base = (query.server or self.default_url or "").rstrip("/")
        if not base:
            return Answer.failed(self.no_default)
        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - self.monotonic())
            if timeout <= 0.5:
                return Answer.failed("not sent: the run's time budget for queries ran out")
        headers = {"Accept": "application/json"}
        if is_google(base):
            if self.token_source is None:
                return Answer.failed("no Google credentials for Managed Prometheus")
            try:
                headers["Authorization"] = f"Bearer {self.token_source()}"
            except ClusterAccessError as error:
                return Answer.failed(error.message)
        url = f"{base}{QUERY_PATH}?{urlencode({'query': query.query, 'timeout': f'{timeout:g}s'})}"
        try:
            response = self.http.request(
                "GET",
                url,
                headers=headers,
                timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT, timeout), read=timeout),
                redirect=False,  # a redirect could carry the token elsewhere
                preload_content=False,
            )
            try:
                body = response.read(MAX_ANSWER_BYTES + 1)
            finally:
                response.release_conn()
        except urllib3.exceptions.NewConnectionError as error:  # a subclass of the timeout error in urllib3 2
            return Answer.failed(f"cannot reach {_host(base)}: {type(error).__name__}")
        except urllib3.exceptions.TimeoutError:
            return Answer.failed(f"timed out after {timeout:g}s")
        except urllib3.exceptions.HTTPError as error:
            return Answer.failed(f"cannot reach {_host(base)}: {type(error).__name__}")
        if len(body) > MAX_ANSWER_BYTES:
            return Answer.failed(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
        return results.from_body(response.status, body)

    def close(self) -> None:
        self.http.clear()
