"""The HPA floor's environment: estafette's variable names, refused when they do not parse."""

from __future__ import annotations

import pytest

from compactor.errors import BadInputError
from compactor.hpa import settings


def test_the_defaults_are_estafettes() -> None:
    loaded = settings.from_env({})
    assert loaded.lower_bound == 3
    assert loaded.allowed_hosts == frozenset()


def test_the_lower_bound_and_allowlist_are_read() -> None:
    loaded = settings.from_env(
        {"MINIMUM_REPLICAS_LOWER_BOUND": "2", "PROMETHEUS_URL_ALLOWLIST": "Prom.Monitoring:9090, thanos.example"}
    )
    assert loaded.lower_bound == 2
    assert loaded.allowed_hosts == {"prom.monitoring:9090", "thanos.example"}


@pytest.mark.parametrize(
    ("env", "named"),
    [
        pytest.param({"MINIMUM_REPLICAS_LOWER_BOUND": "three"}, "MINIMUM_REPLICAS_LOWER_BOUND", id="bound-not-number"),
        pytest.param({"MINIMUM_REPLICAS_LOWER_BOUND": "-1"}, "MINIMUM_REPLICAS_LOWER_BOUND", id="bound-negative"),
        pytest.param({"PROMETHEUS_URL_ALLOWLIST": "http://x/"}, "PROMETHEUS_URL_ALLOWLIST", id="allowlist-url"),
        pytest.param({"PROMETHEUS_SERVER_URL": "prometheus:9090"}, "PROMETHEUS_SERVER_URL", id="server-no-scheme"),
        pytest.param({"PROMETHEUS_SERVER_URL": "http://u:p@prom"}, "PROMETHEUS_SERVER_URL", id="server-credentials"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(BadInputError) as raised:
        settings.from_env(env)
    assert any(named in problem for problem in raised.value.problems)


@pytest.mark.parametrize(
    ("url", "hosts", "ok"),
    [
        pytest.param("http://prom:9090", {"prom:9090"}, True, id="host-and-port"),
        pytest.param("http://prom:9090", {"prom"}, True, id="bare-host-allows-any-port"),
        pytest.param("http://prom:9091", {"prom:9090"}, False, id="other-port"),
        pytest.param("http://prom.evil.example", {"prom"}, False, id="suffix-is-another-host"),
        pytest.param("http://PROM:9090/x", {"prom:9090"}, True, id="case-and-path"),
    ],
)
def test_the_allowlist_matches_hosts_exactly(url: str, hosts: set[str], ok: bool) -> None:
    assert settings.allowed(url, frozenset(hosts)) is ok
