"""Builders for the HPA floor's tests: records from the same JSON the fake API server serves."""

from __future__ import annotations

from typing import Any

from compactor.hpa import reading
from compactor.hpa.model import ENABLED, Cluster, Hpa
from tests.fakeapi import builders as k8s


def hpa(name: str = "web", *, resource_version: str = "7", enabled: bool = True, **options: Any) -> Hpa:
    """An HPA record; `annotations` are added to `estafette.io/hpa-scaler: "true"` unless `enabled=False`."""
    annotations = dict(options.pop("annotations", None) or {})
    if enabled:
        annotations.setdefault(ENABLED, "true")
    obj = k8s.hpa(name, annotations=annotations, **options)
    obj["metadata"]["resourceVersion"] = resource_version
    return reading.hpa_from(obj)


def cluster(*hpas: Hpa, rollouts: dict[tuple[str, str], int] | None = None) -> Cluster:
    return Cluster(tuple(hpas), rollouts or {})
