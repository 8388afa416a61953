"""The HPA floor's Kubernetes adapter: list HPAs and ReplicaSets, patch one HPA, Events on it.

Built on `compactor.kube.client.Cluster` (paginated raw lists, the Lease, Events), so
both jobs share one client behaviour. Writes are exactly those of
`permissions.HPA_FLOOR_RBAC_RULES`: HPA merge patches, Events, the Lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import urllib3
from kubernetes import client

from compactor.hpa import reading
from compactor.hpa.model import Cluster, Hpa
from compactor.kube import client as kube

LEASE_NAME = "node-compactor-hpa"
HPA_API_VERSION = "autoscaling/v2"


class PatchFailedError(Exception):
    """The patch was refused or could not be sent; the message says why (the HPA is as it was)."""


class HpaCluster:
    def __init__(self, api_client: Any) -> None:
        self.kube = kube.Cluster(api_client)
        self.autoscaling = client.AutoscalingV2Api(api_client)
        self.apps = client.AppsV1Api(api_client)

    def read(self, *, replica_sets: bool | None = None) -> Cluster:
        """All HPAs; ReplicaSets too when `replica_sets` is true, or (None) when an HPA asks for the rollout check."""
        raw = list(
            self.kube.pages(
                "list HorizontalPodAutoscalers", self.autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces
            )
        )
        cluster = reading.cluster_from(raw)
        from compactor.hpa import planner

        if replica_sets or (replica_sets is None and planner.needs_replica_sets(cluster)):
            sets = self.kube.pages("list ReplicaSets", self.apps.list_replica_set_for_all_namespaces)
            cluster = Cluster(cluster.hpas, reading.active_replica_sets(sets))
        return cluster

    def patch(self, hpa: Hpa, patch: Mapping[str, Any]) -> None:
        """One JSON merge patch; the resourceVersion in it makes a changed HPA a conflict, not an overwrite."""
        try:
            self.autoscaling.patch_namespaced_horizontal_pod_autoscaler(
                hpa.name,
                hpa.namespace,
                dict(patch),
                _content_type=kube.MERGE_PATCH,
                _preload_content=False,
                _request_timeout=kube.REQUEST_TIMEOUT,
            )
        except client.ApiException as error:
            if error.status == 409:
                raise PatchFailedError(
                    "it changed since it was read (409 Conflict); the next run decides again"
                ) from error
            if error.status == 404:
                raise PatchFailedError("it no longer exists") from error
            raise PatchFailedError(kube.access_error("patch it", error).message) from error
        except urllib3.exceptions.HTTPError as error:
            raise PatchFailedError(f"the patch could not be sent: {type(error).__name__}: {error}") from error

    def event(self, hpa: Hpa, *, reason: str, message: str, warning: bool, now: datetime) -> None:
        involved = {"metadata": {"name": hpa.name, "namespace": hpa.namespace, "uid": hpa.uid}}
        self.kube.event(
            involved,
            reason=reason,
            message=message,
            warning=warning,
            now=now,
            kind="HorizontalPodAutoscaler",
            api_version=HPA_API_VERSION,
        )
