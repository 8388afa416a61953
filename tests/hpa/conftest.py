"""Fixtures for HPA floor runs against the fake API server and the fake Prometheus."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from compactor.hpa import service
from compactor.hpa.model import ENABLED
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.fakeprometheus import FakePrometheus, running
from tests.integration.conftest import NOW, TOKEN, connector_for

RATE = 'sum(rate(http_requests_total{app="web"}[5m]))'


@pytest.fixture(autouse=True)
def _no_json_handler_left_behind() -> Iterator[None]:
    """The command line points the JSON log handler at the test's captured stderr; drop it after the test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == "node-compactor-json":
            root.removeHandler(handler)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with running() as fake:
        yield fake


def env_for(prom: FakePrometheus, **extra: str) -> dict[str, str]:
    return {"PROMETHEUS_SERVER_URL": prom.url, "COMPACTOR_RUN_BUDGET_SECONDS": "60", **extra}


def run_hpa(api: FakeApiServer, prom: FakePrometheus, *, dry_run: bool = False, **extra: str) -> service.HpaRunResult:
    return service.run(env_for(prom, **extra), connector=connector_for(api), force_dry_run=dry_run, clock=lambda: NOW)


def scaled_hpa(name: str = "web", *, namespace: str = "default", **options: Any) -> dict[str, Any]:
    annotations = {ENABLED: "true", **(options.pop("annotations", None) or {})}
    return k8s.hpa(name, namespace=namespace, annotations=annotations, **options)


def min_replicas(api: FakeApiServer, name: str = "web", namespace: str = "default") -> int:
    found = api.get("HorizontalPodAutoscaler", name, namespace)
    assert found is not None
    return int(found["spec"]["minReplicas"])


def annotations_of(api: FakeApiServer, name: str = "web", namespace: str = "default") -> dict[str, str]:
    found = api.get("HorizontalPodAutoscaler", name, namespace)
    assert found is not None
    result: dict[str, str] = found["metadata"].get("annotations") or {}
    return result


def hpa_events(api: FakeApiServer, name: str = "web") -> list[dict[str, Any]]:
    return [
        event
        for event in api.objects("Event")
        if event["involvedObject"].get("kind") == "HorizontalPodAutoscaler" and event["involvedObject"]["name"] == name
    ]
