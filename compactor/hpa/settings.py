"""The HPA floor's settings from the environment, checked before anything is read or written.

estafette-k8s-hpa-scaler's variable names where it has one:
`MINIMUM_REPLICAS_LOWER_BOUND` (default 3) and `PROMETHEUS_SERVER_URL`
(unset: Google Cloud Managed Service for Prometheus). Ours:
`PROMETHEUS_URL_ALLOWLIST`, the hosts a per-HPA
`estafette.io/hpa-scaler-prometheus-server-url` may name (comma-separated
`host` or `host:port`; empty: none). Where estafette falls back to the default
on a value it cannot read, we refuse the run (a typo must not change a floor).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from compactor.errors import BadInputError
from compactor.hpa.model import DEFAULT_LOWER_BOUND, Settings

ENV_LOWER_BOUND = "MINIMUM_REPLICAS_LOWER_BOUND"
ENV_SERVER_URL = "PROMETHEUS_SERVER_URL"
ENV_ALLOWLIST = "PROMETHEUS_URL_ALLOWLIST"


def from_env(env: Mapping[str, str]) -> Settings:
    problems: list[str] = []
    lower_bound = DEFAULT_LOWER_BOUND
    text = (env.get(ENV_LOWER_BOUND) or "").strip()
    if text:
        try:
            lower_bound = int(text, 0)
        except ValueError:
            problems.append(f"{ENV_LOWER_BOUND}: {text!r} is not a whole number of replicas")
        else:
            if lower_bound < 0:
                problems.append(f"{ENV_LOWER_BOUND}: {lower_bound} is negative")
    hosts: set[str] = set()
    for entry in (env.get(ENV_ALLOWLIST) or "").split(","):
        host = entry.strip().lower()
        if not host:
            continue
        if "/" in host or "@" in host or " " in host:
            problems.append(f"{ENV_ALLOWLIST}: {entry.strip()!r} is not a host name (give host or host:port)")
            continue
        hosts.add(host)
    server = env.get(ENV_SERVER_URL)
    if server:
        problem = url_problem(server)
        if problem:
            problems.append(f"{ENV_SERVER_URL}: {problem}")
    if problems:
        raise BadInputError("invalid HPA floor settings", problems)
    return Settings(lower_bound=lower_bound, allowed_hosts=frozenset(hosts))


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a Prometheus server URL, or None."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        return f"{url!r} is not a URL ({error})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL with a host"
    if parts.username or parts.password:
        return f"{url!r} carries credentials; they do not belong in a URL"
    if parts.query or parts.fragment:
        return f"{url!r} has a query or fragment; give the server's base URL"
    return None


def host_of(url: str) -> str:
    """`host` or `host:port` (lower case), as PROMETHEUS_URL_ALLOWLIST lists them."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host


def allowed(url: str, allowed_hosts: frozenset[str]) -> bool:
    """A URL may be used when its host (or host:port) is listed; a listed bare host allows any port."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    return host_of(url) in allowed_hosts or host in allowed_hosts
