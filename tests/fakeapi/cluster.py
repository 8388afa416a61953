"""What the fake cluster does with a request, independent of HTTP.

The REST semantics node-compactor relies on (create, get, list, update, patch,
delete, evict) with kube-apiserver's rules for names, namespaces,
resourceVersion preconditions and status subresources, plus the few
controllers whose reactions a drain depends on:

- the eviction subresource's PodDisruptionBudget check and decrement;
- the kubelet's graceful termination (a pod first gets `deletionTimestamp`);
- workload controllers that recreate an evicted pod and the scheduler that
  binds the replacement (off unless a test turns it on);
- the node lifecycle controller's `node.kubernetes.io/unschedulable` taint;
- the PDB controller, only as far as giving budget back when a replacement runs.

Every public method expects the caller to hold `lock`. Errors are raised as
`statuses.ApiError` and never leave the fake as anything else.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from tests.fakeapi import deployments, events, leases, patches, scheduling, selectors, statuses
from tests.fakeapi.resources import (
    BY_KIND,
    CORE_EVENTS,
    EVENTS,
    KINDS_ALLOWING_UNCONDITIONAL_UPDATE,
    KINDS_CREATED_ON_UPDATE,
    KINDS_WITH_STATUS_SUBRESOURCE,
    PODS,
    JsonObject,
    Resource,
    resource_for_object,
)
from tests.fakeapi.store import Page, Store, object_key
from tests.fakeapi.timers import Timers

logger = logging.getLogger(__name__)

REPLACING_CONTROLLERS = frozenset({"ReplicaSet", "StatefulSet", "Job", "ReplicationController"})
# These controllers stop counting a pod once it is terminating and start its replacement
# at once; a StatefulSet waits until the old pod is gone because the name is reused.
REPLACED_WHEN_TERMINATING = frozenset({"ReplicaSet", "Job", "ReplicationController"})

# The alphabet apiserver's name generator draws `generateName` suffixes from.
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_EVICTION_API_VERSIONS = ("policy/v1", "policy/v1beta1")
_PDB_RESOURCE_IN_ERRORS = Resource("PodDisruptionBudget", "poddisruptionbudget", "policy", "v1", namespaced=True)


def now_rfc3339(offset_seconds: float = 0.0) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def deep_copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def controller_of(obj: JsonObject) -> JsonObject | None:
    for reference in obj.get("metadata", {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return dict(reference)
    return None


def _strip_type_meta(obj: JsonObject) -> JsonObject:
    return {key: value for key, value in obj.items() if key not in ("kind", "apiVersion")}


class Cluster:
    def __init__(self) -> None:
        self.store = Store()
        self.lock = self.store.lock
        self.timers = Timers(self.lock)
        self.recreate_delay: float | None = None
        # Seconds between two steps of a Deployment's rolling update (`deployments`).
        self.rollout_step = 0.05
        self.termination_delay = 0.0
        self._unscheduled: set[str] = set()
        self._random = random.Random()

    # ----------------------------------------------------------------- test-side access

    def add(self, obj: JsonObject) -> JsonObject:
        """Create or replace an object as a test fixture: no validation, controllers still react."""
        resource = resource_for_object(obj)
        stored = _strip_type_meta(deep_copy(obj))
        if resource is EVENTS:
            stored = events.to_core(stored)
        elif resource is CORE_EVENTS:
            stored = events.with_zero_values(stored)
        metadata = stored.setdefault("metadata", {})
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the object needs metadata.name")
        if resource.namespaced:
            metadata["namespace"] = metadata.get("namespace") or "default"
        else:
            metadata.pop("namespace", None)
        kind = resource.kind
        key = object_key(metadata.get("namespace"), name)
        existing = self.store.get(kind, key)
        existing_metadata = existing["metadata"] if existing else {}
        metadata.setdefault("uid", existing_metadata.get("uid") or str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", existing_metadata.get("creationTimestamp") or now_rfc3339())
        metadata.pop("resourceVersion", None)
        self._admit(kind, stored, existing)
        self.store.put(kind, key, stored)
        self._after_write(kind)
        return self.typed_copy(BY_KIND[kind], key)

    def add_all(self, objects: list[JsonObject]) -> int:
        """Bulk `add` for large fixtures: takes ownership of the dicts instead of copying them."""
        for obj in objects:
            resource = resource_for_object(obj)
            obj.pop("kind", None)
            obj.pop("apiVersion", None)
            stored = events.to_core(obj) if resource is EVENTS else obj
            if resource is CORE_EVENTS:
                events.with_zero_values(stored)
            metadata = stored.setdefault("metadata", {})
            if resource.namespaced:
                metadata["namespace"] = metadata.get("namespace") or "default"
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", now_rfc3339())
            metadata.pop("resourceVersion", None)
            key = object_key(metadata.get("namespace"), metadata["name"])
            self._admit(resource.kind, stored, self.store.get(resource.kind, key))
            self.store.put(resource.kind, key, stored)
            self.store.encoded(resource.kind, key)
        self._after_write("Node")
        return len(objects)

    def remove(self, kind: str, name: str, namespace: str | None) -> bool:
        """Remove an object as the test's doing (say, the Cluster Autoscaler deleting a node)."""
        resource = BY_KIND[kind]
        key = self._key(resource, namespace, name)
        removed = self.store.remove(kind, key)
        if removed is not None and kind == "Pod":
            self._pod_gone(removed, evicted=False)
            self._schedule_unscheduled()
        return removed is not None

    def typed_copy(self, resource: Resource, key: str) -> JsonObject:
        body = self.store.copy(resource.kind, key)
        if resource is EVENTS:
            body = events.to_events_v1(body)
        return {"kind": resource.kind, "apiVersion": resource.api_version, **body}

    def find(self, kind: str, name: str, namespace: str | None) -> JsonObject | None:
        resource = BY_KIND[kind]
        key = self._key(resource, namespace, name)
        if self.store.get(kind, key) is None:
            return None
        return self.typed_copy(resource, key)

    def all_of(self, kind: str, namespace: str | None) -> list[JsonObject]:
        resource = BY_KIND[kind]
        keys = self.store.keys_in_namespace(kind, namespace if resource.namespaced else None)
        return [self.typed_copy(resource, key) for key in keys]

    # ----------------------------------------------------------------- REST verbs

    def get(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        key = self._key(resource, namespace, name)
        if self.store.get(resource.kind, key) is None:
            raise statuses.not_found(resource, name)
        return self._typed_bytes(resource, key)

    def list_collection(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> bytes:
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise statuses.bad_request(f"limit: Invalid value: {query.get('limit')!r}") from None
        page = self._page(resource, namespace, query, limit=limit, continue_token=query.get("continue", ""))
        metadata: JsonObject = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            metadata["continue"] = page.continue_token
        if page.remaining_item_count is not None:
            metadata["remainingItemCount"] = page.remaining_item_count
        head = orjson.dumps({"kind": resource.list_kind, "apiVersion": resource.api_version, "metadata": metadata})
        return head[:-1] + b',"items":[' + b",".join(page.items) + b"]}"

    def initial_events(
        self, resource: Resource, namespace: str | None, query: dict[str, str]
    ) -> tuple[int, list[bytes]]:
        """What a streaming list sends before its bookmark: the resource version and every matching object's JSON."""
        page = self._page(resource, namespace, query, limit=0, continue_token="")
        return page.resource_version, page.items

    def selection(self, resource: Resource, query: dict[str, str]) -> Callable[[JsonObject], bool] | None:
        """What the field and label selectors of `query` let through (None: everything), as for a list."""
        fields = selectors.parse_field_selector(
            query.get("fieldSelector", ""), resource.kind, events_v1=resource is EVENTS
        )
        labels = selectors.parse_label_selector(query.get("labelSelector", ""))
        if not fields and not labels:
            return None

        def predicate(obj: JsonObject) -> bool:
            if not all(requirement.matches(obj) for requirement in fields):
                return False
            object_labels = selectors.labels_of(obj)
            return all(requirement.matches(object_labels) for requirement in labels)

        return predicate

    def _page(
        self, resource: Resource, namespace: str | None, query: dict[str, str], *, limit: int, continue_token: str
    ) -> Page:
        fields = selectors.parse_field_selector(
            query.get("fieldSelector", ""), resource.kind, events_v1=resource is EVENTS
        )
        labels = selectors.parse_label_selector(query.get("labelSelector", ""))
        predicate: Callable[[JsonObject], bool] | None = None
        if fields or labels:

            def predicate(obj: JsonObject) -> bool:
                if not all(requirement.matches(obj) for requirement in fields):
                    return False
                object_labels = selectors.labels_of(obj)
                return all(requirement.matches(object_labels) for requirement in labels)

        kind = resource.kind
        node_name = next((r.value for r in fields if r.field in ("spec.nodeName", "spec.host") and r.equal), None)

        def candidate_keys() -> list[str]:
            if kind == "Pod" and node_name is not None:
                on_node = self.store.pod_keys_on_node(node_name)
                prefix = f"{namespace}/" if namespace else ""
                return [key for key in on_node if key.startswith(prefix)]
            return self.store.keys_in_namespace(kind, namespace)

        encode = None
        if resource is EVENTS:

            def encode(obj: JsonObject) -> bytes:
                return orjson.dumps(events.to_events_v1(obj))

        return self.store.list_page(
            kind,
            f"{resource.api_version}/{resource.plural}/{namespace or ''}",
            candidate_keys,
            predicate,
            limit=limit,
            continue_token=continue_token,
            encode=encode,
        )

    def create(self, resource: Resource, namespace: str | None, body: JsonObject) -> bytes:
        stored = self._incoming(resource, namespace, body)
        metadata = stored["metadata"]
        if not metadata.get("name"):
            generate_name = metadata.get("generateName")
            if not generate_name:
                raise statuses.invalid(
                    resource,
                    "",
                    [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
                )
            metadata["name"] = self._generated_name(resource, namespace, generate_name)
        name = metadata["name"]
        key = self._key(resource, namespace, name)
        if self.store.get(resource.kind, key) is not None:
            raise statuses.already_exists(resource, name)
        self._validate_event(resource, stored, name)
        _check_decodes(resource, stored)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now_rfc3339()
        for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            metadata.pop(server_owned, None)
        self._admit(resource.kind, stored, None)
        self.store.put(resource.kind, key, stored)
        self._after_write(resource.kind)
        return self._typed_bytes(resource, key)

    def update(self, resource: Resource, namespace: str | None, name: str, body: JsonObject) -> tuple[bytes, bool]:
        """PUT; returns the stored object and whether the PUT created it."""
        stored = self._incoming(resource, namespace, body)
        metadata = stored["metadata"]
        if metadata.get("name") != name:
            raise statuses.bad_request(
                f"the name of the object ({metadata.get('name', '')}) does not match the name on the URL ({name})"
            )
        key = self._key(resource, namespace, name)
        existing = self.store.get(resource.kind, key)
        if existing is None:
            if resource.kind not in KINDS_CREATED_ON_UPDATE:
                raise statuses.not_found(resource, name)
            return self.create(resource, namespace, body), True
        stored_version = existing["metadata"]["resourceVersion"]
        given_version = metadata.get("resourceVersion") or ""
        if not given_version:
            if resource.kind not in KINDS_ALLOWING_UNCONDITIONAL_UPDATE:
                raise statuses.invalid(
                    resource,
                    name,
                    [
                        (
                            "metadata.resourceVersion",
                            "FieldValueInvalid",
                            "Invalid value: 0: must be specified for an update",
                        )
                    ],
                    by_resource=True,
                )
        elif given_version != stored_version:
            raise statuses.conflict(resource, name)
        given_uid = metadata.get("uid")
        if given_uid and given_uid != existing["metadata"].get("uid"):
            # etcd3's storage checks a uid in a PUT as a precondition (a PATCH's is a validation error).
            raise statuses.uid_mismatch_on_update(resource, namespace, name, given_uid, existing["metadata"]["uid"])
        self._write_over(resource, key, existing, stored)
        return self._typed_bytes(resource, key), False

    def patch(
        self, resource: Resource, namespace: str | None, name: str, content_type: str, body: bytes
    ) -> tuple[bytes, Any]:
        """PATCH; returns the stored object and the decoded patch."""
        key = self._key(resource, namespace, name)
        existing = self.store.get(resource.kind, key)
        if existing is None:
            raise statuses.not_found(resource, name)
        patched, patch = patches.apply(content_type, self.typed_copy(resource, key), body)
        if not isinstance(patched, dict):
            raise statuses.unprocessable("the patched document is not an object")
        metadata = patched.get("metadata")
        if not isinstance(metadata, dict) or metadata.get("name") != name:
            raise statuses.bad_request("metadata.name: Invalid value: the name of a patched object cannot change")
        if resource.namespaced and metadata.get("namespace") != namespace:
            raise statuses.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        # kube-apiserver treats a resourceVersion carried in the patch as an optimistic-lock precondition.
        given_version = metadata.get("resourceVersion")
        if given_version and given_version != existing["metadata"]["resourceVersion"]:
            raise statuses.conflict(resource, name)
        patched_uid = metadata.get("uid")
        if patched_uid is not None and patched_uid != existing["metadata"].get("uid"):
            # ValidateObjectMetaUpdate. (kube-apiserver lists this cause twice for some kinds, Pod,
            # Node and Lease among them, once for others such as PodDisruptionBudget; the fake once.)
            shown = f'"{patched_uid}"' if isinstance(patched_uid, str) else orjson.dumps(patched_uid).decode()
            raise statuses.invalid(
                resource, name, [("metadata.uid", "FieldValueInvalid", f"Invalid value: {shown}: field is immutable")]
            )
        stored = _strip_type_meta(patched)
        if resource is EVENTS:
            stored = events.to_core(stored)
        elif resource is CORE_EVENTS:
            stored = events.with_zero_values(stored)
        self._write_over(resource, key, existing, stored)
        return self._typed_bytes(resource, key), patch

    def delete(self, resource: Resource, namespace: str | None, name: str, options: JsonObject) -> bytes:
        key = self._key(resource, namespace, name)
        existing = self.store.get(resource.kind, key)
        if existing is None:
            raise statuses.not_found(resource, name)
        self._check_preconditions(resource, existing, options)
        if resource is PODS:
            grace = options.get("gracePeriodSeconds")
            pod = self._terminate_pod(key, grace if isinstance(grace, int) else None, evicted=False)
            return orjson.dumps({"kind": "Pod", "apiVersion": "v1", **pod})
        self.store.remove(resource.kind, key)
        details: JsonObject = {"name": name}
        if resource.group:
            details["group"] = resource.group
        details["kind"] = resource.plural
        details["uid"] = existing["metadata"].get("uid", "")
        return orjson.dumps(statuses.success_body(200, details))

    def evict(self, namespace: str, name: str, body: JsonObject) -> tuple[int, bytes]:
        """POST pods/{name}/eviction, following kube-apiserver's EvictionREST.Create."""
        if (
            body.get("kind", "Eviction") != "Eviction"
            or body.get("apiVersion", "policy/v1") not in _EVICTION_API_VERSIONS
        ):
            raise statuses.bad_request(f"not a Eviction object: {body.get('apiVersion')}/{body.get('kind')}")
        body_metadata = body.get("metadata") or {}
        if body_metadata.get("namespace") and body_metadata["namespace"] != namespace:
            raise statuses.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if body_metadata.get("name") != name:
            raise statuses.bad_request("name in URL does not match name in Eviction object")
        options = body.get("deleteOptions") or {}
        if options.get("dryRun"):
            raise statuses.bad_request("dryRun is not supported by the fake API server")
        key = object_key(namespace, name)
        pod = self.store.get("Pod", key)
        if pod is None:
            raise statuses.not_found(PODS, name)
        self._check_preconditions(PODS, pod, options)
        grace = options.get("gracePeriodSeconds")
        grace = grace if isinstance(grace, int) else None
        phase = (pod.get("status") or {}).get("phase")
        # Pods that are not running, or already going, cost no disruption: no PDB check.
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            self._terminate_pod(key, grace, evicted=True)
            return 201, orjson.dumps(statuses.success_body(201))
        budgets = self._budgets_covering(pod)
        if len(budgets) > 1:
            # EvictionREST.Create returns this Status as its result, not as an error; the request
            # finisher turns a result Status that is not Success into an error, so the answer is
            # HTTP 500 with this body (k8s.io/apiserver/pkg/endpoints/handlers/finisher/finisher.go).
            return 500, orjson.dumps(
                statuses.failure_body(
                    500,
                    "",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            )
        if budgets:
            self._take_disruption(budgets[0], pod)
        self._terminate_pod(key, grace, evicted=True)
        return 201, orjson.dumps(statuses.success_body(201))

    # ----------------------------------------------------------------- controllers

    def schedule_pending(self) -> list[str]:
        """Retry binding replacement pods that found no node; returns the names bound."""
        return self._schedule_unscheduled()

    def _take_disruption(self, budget_key: str, pod: JsonObject) -> None:
        budget = self.store.copy("PodDisruptionBudget", budget_key)
        budget_name = budget["metadata"]["name"]
        status = budget.setdefault("status", {})
        desired = int(status.get("desiredHealthy", 0))
        current = int(status.get("currentHealthy", 0))
        # An unready pod does not count as healthy, so evicting it spends no budget.
        if not scheduling.is_ready(pod) and current >= desired and desired > 0:
            return
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            raise statuses.forbidden(_PDB_RESOURCE_IN_ERRORS, budget_name, "pdb disruptions allowed is negative")
        if allowed == 0:
            raise statuses.too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {budget_name} needs {desired} healthy pods"
                        f" and has {current} currently",
                    }
                ],
            )
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_rfc3339()
        _set_disruption_condition(budget)
        self.store.put("PodDisruptionBudget", budget_key, budget)

    def _budgets_covering(self, pod: JsonObject) -> list[str]:
        namespace = pod["metadata"].get("namespace")
        labels = selectors.labels_of(pod)
        return [
            key
            for key in self.store.keys_in_namespace("PodDisruptionBudget", namespace)
            if selectors.label_selector_object_matches(
                (self.store.get("PodDisruptionBudget", key) or {}).get("spec", {}).get("selector"), labels
            )
        ]

    def _terminate_pod(self, key: str, grace: int | None, *, evicted: bool) -> JsonObject:
        """Start the kubelet's graceful shutdown, or remove at once; returns the pod as answered."""
        pod = self.store.copy("Pod", key)
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            return pod
        grace_seconds = (
            grace if grace is not None else int(pod.get("spec", {}).get("terminationGracePeriodSeconds", 30))
        )
        bound = bool(pod.get("spec", {}).get("nodeName"))
        if grace_seconds > 0 and bound:
            # kube-apiserver answers a bound pod's graceful deletion with the pod marked as terminating,
            # however soon its kubelet then removes it (here at once, with no termination delay).
            metadata["deletionTimestamp"] = now_rfc3339(grace_seconds)
            metadata["deletionGracePeriodSeconds"] = grace_seconds
        if self.termination_delay <= 0 or grace_seconds == 0 or not bound:
            self._remove_pod(key, metadata.get("uid", ""), replace=set(REPLACING_CONTROLLERS), evicted=evicted)
            return pod
        self.store.put("Pod", key, pod)
        uid = metadata.get("uid", "")
        self.timers.call_later(
            self.termination_delay,
            lambda: self._remove_pod(key, uid, replace={"StatefulSet"}, evicted=evicted),
        )
        self._schedule_replacement(pod, REPLACED_WHEN_TERMINATING)
        return self.store.copy("Pod", key)

    def _remove_pod(self, key: str, uid: str, *, replace: set[str], evicted: bool) -> None:
        current = self.store.get("Pod", key)
        if current is None or current["metadata"].get("uid") != uid:
            return
        removed = self.store.remove("Pod", key)
        if removed is None:
            return
        self._pod_gone(removed, evicted=evicted)
        self._schedule_replacement(removed, replace)
        self._schedule_unscheduled()

    def _pod_gone(self, pod: JsonObject, *, evicted: bool) -> None:
        """The PDB controller's view: a gone pod is no longer healthy; a deletion outside the
        eviction API spends budget the eviction would otherwise have spent."""
        was_ready = scheduling.is_ready(pod) and (pod.get("status") or {}).get("phase") == "Running"
        for budget_key in self._budgets_covering(pod):
            budget = self.store.copy("PodDisruptionBudget", budget_key)
            status = budget.setdefault("status", {})
            if was_ready:
                status["currentHealthy"] = max(0, int(status.get("currentHealthy", 0)) - 1)
                if not evicted:
                    status["disruptionsAllowed"] = max(0, int(status.get("disruptionsAllowed", 0)) - 1)
            (status.get("disruptedPods") or {}).pop(pod["metadata"]["name"], None)
            if not status.get("disruptedPods"):
                status.pop("disruptedPods", None)
            _set_disruption_condition(budget)
            self.store.put("PodDisruptionBudget", budget_key, budget)

    def _pod_running(self, pod: JsonObject) -> None:
        for budget_key in self._budgets_covering(pod):
            budget = self.store.copy("PodDisruptionBudget", budget_key)
            status = budget.setdefault("status", {})
            status["currentHealthy"] = int(status.get("currentHealthy", 0)) + 1
            status["disruptionsAllowed"] = int(status.get("disruptionsAllowed", 0)) + 1
            _set_disruption_condition(budget)
            self.store.put("PodDisruptionBudget", budget_key, budget)

    def _schedule_replacement(self, pod: JsonObject, kinds: set[str] | frozenset[str]) -> None:
        owner = controller_of(pod)
        if self.recreate_delay is None or owner is None or owner.get("kind") not in kinds:
            return
        template = deep_copy(pod)
        self.timers.call_later(self.recreate_delay, lambda: self._create_replacement(template))

    def _create_replacement(self, template: JsonObject) -> None:
        owner = controller_of(template) or {}
        old_metadata = template["metadata"]
        namespace = old_metadata["namespace"]
        if owner.get("kind") == "StatefulSet":
            name = old_metadata["name"]
            if self.store.get("Pod", object_key(namespace, name)) is not None:
                logger.info("StatefulSet pod %s/%s still exists; not recreating it", namespace, name)
                return
        else:
            name = self._generated_name(
                PODS, namespace, old_metadata.get("generateName") or f"{owner.get('name', 'pod')}-"
            )
        metadata: JsonObject = {
            key: deep_copy(old_metadata[key])
            for key in ("labels", "annotations", "ownerReferences", "generateName")
            if key in old_metadata
        }
        metadata.update(name=name, namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
        spec = deep_copy(template.get("spec") or {})
        spec.pop("nodeName", None)
        pod: JsonObject = {"metadata": metadata, "spec": spec, "status": {}}
        qos_class = (template.get("status") or {}).get("qosClass")
        if qos_class:
            pod["status"]["qosClass"] = qos_class
        key = object_key(namespace, name)
        if not self._bind(pod):
            self._unscheduled.add(key)
        self.store.put("Pod", key, pod)
        if pod["spec"].get("nodeName"):
            self._pod_running(pod)

    def _bind(self, pod: JsonObject) -> bool:
        """Place the pod like the default scheduler; fills spec.nodeName and status either way."""
        nodes = [node for _, node in self.store.items("Node")]
        residents = {
            node["metadata"]["name"]: [
                resident
                for resident_key in self.store.pod_keys_on_node(node["metadata"]["name"])
                if (resident := self.store.get("Pod", resident_key)) is not None
            ]
            for node in nodes
        }
        placement = scheduling.choose_node(pod, nodes, residents)
        now = now_rfc3339()
        status = pod.setdefault("status", {})
        if placement.node is None:
            status.update(
                phase="Pending",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "lastProbeTime": None,
                        "lastTransitionTime": now,
                        "reason": "Unschedulable",
                        "message": placement.message,
                    }
                ],
            )
            return False
        pod["spec"]["nodeName"] = placement.node
        node = self.store.get("Node", placement.node) or {}
        host_ip = next(
            (
                a.get("address")
                for a in (node.get("status") or {}).get("addresses") or []
                if a.get("type") == "InternalIP"
            ),
            None,
        )
        pod_ip = str(ipaddress.IPv4Address(0x0A000000 + self._random.randrange(1, 2**24 - 1)))

        def condition(kind: str) -> JsonObject:
            return {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}

        status.update(
            phase="Running",
            conditions=[
                condition(kind)
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            startTime=now,
            containerStatuses=[
                {
                    "name": container.get("name", ""),
                    "image": container.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for container in pod["spec"].get("containers") or []
            ],
        )
        if host_ip:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        return True

    def _schedule_unscheduled(self) -> list[str]:
        bound: list[str] = []
        for key in sorted(self._unscheduled):
            stored = self.store.get("Pod", key)
            if stored is None or stored.get("spec", {}).get("nodeName"):
                self._unscheduled.discard(key)
                continue
            pod = self.store.copy("Pod", key)
            if self._bind(pod):
                self._unscheduled.discard(key)
                self.store.put("Pod", key, pod)
                self._pod_running(pod)
                bound.append(pod["metadata"]["name"])
        return bound

    # ----------------------------------------------------------------- shared steps

    def _key(self, resource: Resource, namespace: str | None, name: str) -> str:
        return object_key((namespace or "default") if resource.namespaced else None, name)

    def _typed_bytes(self, resource: Resource, key: str) -> bytes:
        if resource is EVENTS:
            return orjson.dumps(self.typed_copy(resource, key))
        return b"{" + resource.type_meta + self.store.encoded(resource.kind, key)[1:]

    def _generated_name(self, resource: Resource, namespace: str | None, prefix: str) -> str:
        while True:
            name = prefix + "".join(self._random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
            if self.store.get(resource.kind, self._key(resource, namespace, name)) is None:
                return name

    def _incoming(self, resource: Resource, namespace: str | None, body: JsonObject) -> JsonObject:
        """The request body as it will be stored: type checked, namespaced, in stored shape."""
        kind = body.get("kind")
        if kind is not None and kind != resource.kind:
            raise statuses.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
            )
        api_version = body.get("apiVersion")
        if api_version is not None and api_version != resource.api_version:
            raise statuses.bad_request(
                f"the API version in the data ({api_version}) does not match "
                f"the expected API version ({resource.api_version})"
            )
        stored = _strip_type_meta(body)
        if resource is EVENTS:
            stored = events.to_core(stored)
        elif resource is CORE_EVENTS:
            stored = events.with_zero_values(stored)
        metadata = stored.get("metadata")
        if metadata is None:
            metadata = stored["metadata"] = {}
        if not isinstance(metadata, dict):
            raise statuses.bad_request("metadata must be an object")
        if resource.namespaced:
            given = metadata.get("namespace")
            if given and given != namespace:
                raise statuses.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        return stored

    def _write_over(self, resource: Resource, key: str, existing: JsonObject, stored: JsonObject) -> None:
        _check_decodes(resource, stored)
        metadata = stored.setdefault("metadata", {})
        for immutable in ("uid", "creationTimestamp", "namespace", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if immutable in existing["metadata"]:
                metadata[immutable] = existing["metadata"][immutable]
            else:
                metadata.pop(immutable, None)
        metadata["resourceVersion"] = existing["metadata"]["resourceVersion"]
        if resource.kind in KINDS_WITH_STATUS_SUBRESOURCE:
            if "status" in existing:
                stored["status"] = deep_copy(existing["status"])
            else:
                stored.pop("status", None)
        self._admit(resource.kind, stored, existing)
        if stored == existing:
            return  # kube-apiserver skips no-op writes: the resourceVersion stays
        self.store.put(resource.kind, key, stored)
        self._after_write(resource.kind)

    def _admit(self, kind: str, obj: JsonObject, existing: JsonObject | None) -> None:
        if kind == "Node":
            _reconcile_unschedulable_taint(obj)
        elif kind == "PodDisruptionBudget":
            metadata = obj.setdefault("metadata", {})
            generation = int((existing or {}).get("metadata", {}).get("generation", metadata.get("generation", 1)))
            if existing is not None and obj.get("spec") != existing.get("spec"):
                generation += 1
            metadata["generation"] = generation
            # The fake's PDB controller observes every spec at once: no "still being processed" 429s.
            obj.setdefault("status", {})["observedGeneration"] = generation
        elif kind == "Deployment":
            deployments.admit(obj, existing)

    def _after_write(self, kind: str) -> None:
        if kind == "Node" and self._unscheduled:
            self._schedule_unscheduled()
        elif kind == "Deployment":
            self.timers.call_later(self.rollout_step, lambda: deployments.reconcile_all(self))

    # ----------------------------------------------------------------- for the controllers in other modules

    def new_pod_name(self, namespace: str, prefix: str) -> str:
        return self._generated_name(PODS, namespace, prefix)

    def start_pod(self, pod: JsonObject) -> JsonObject:
        """A controller's new pod: placed by the scheduler (Pending when no node takes it) and stored."""
        metadata = pod["metadata"]
        metadata["creationTimestamp"] = now_rfc3339()
        key = object_key(metadata["namespace"], metadata["name"])
        if not self._bind(pod):
            self._unscheduled.add(key)
        self.store.put("Pod", key, pod)
        if pod["spec"].get("nodeName"):
            self._pod_running(pod)
        return self.store.copy("Pod", key)

    def remove_pod_by_controller(self, key: str, uid: str) -> None:
        """A pod its controller deletes (a rollout scaling its old ReplicaSet down): no eviction, no replacement."""
        self._remove_pod(key, uid, replace=set(), evicted=False)

    def _validate_event(self, resource: Resource, stored: JsonObject, name: str) -> None:
        if resource.kind == "Event":
            errors = events.validation_errors(stored, strict=resource is EVENTS)
            if errors:
                # Both APIs store core Events: the error names the core kind (`Event "x"`), either way.
                raise statuses.invalid(CORE_EVENTS, name, errors)

    def _check_preconditions(self, resource: Resource, existing: JsonObject, options: JsonObject) -> None:
        preconditions = options.get("preconditions") or {}
        metadata = existing["metadata"]
        name = metadata["name"]
        # Worded as k8s.io/apiserver's rest.BeforeDelete words them.
        uid = preconditions.get("uid")
        if uid and uid != metadata.get("uid"):
            raise statuses.precondition_failed(
                resource,
                name,
                f"the UID in the precondition ({uid}) does not match the UID in record ({metadata.get('uid')}). "
                "The object might have been deleted and then recreated",
            )
        version = preconditions.get("resourceVersion")
        if version and version != metadata.get("resourceVersion"):
            raise statuses.precondition_failed(
                resource,
                name,
                f"the ResourceVersion in the precondition ({version}) does not match the ResourceVersion in record "
                f"({metadata.get('resourceVersion')}). The object might have been modified",
            )


def _check_decodes(resource: Resource, obj: JsonObject) -> None:
    """Refuse a written object the real server could not decode into its Go type (400 BadRequest)."""
    if resource.kind == "Lease":
        problem = leases.decode_problem(obj)
        if problem is not None:
            raise statuses.bad_request(problem)


def _reconcile_unschedulable_taint(node: JsonObject) -> None:
    """What the node lifecycle controller does for a cordon (in the same write, not a moment later).

    NodeSpec's `unschedulable` and `taints` are `omitempty` in k8s.io/api: kube-apiserver decodes
    `unschedulable: false` and `taints: []` and serves neither, so neither is stored here.
    """
    spec = node.setdefault("spec", {})
    if spec.get("unschedulable") is False:
        del spec["unschedulable"]
    taints = list(spec.get("taints") or [])
    key = scheduling.UNSCHEDULABLE_TAINT["key"]
    tainted = any(t.get("key") == key for t in taints)
    if spec.get("unschedulable") and not tainted:
        taints = [*taints, {"key": key, "effect": "NoSchedule", "timeAdded": now_rfc3339()}]
    elif not spec.get("unschedulable") and tainted:
        taints = [t for t in taints if t.get("key") != key]
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)


def _set_disruption_condition(budget: JsonObject) -> None:
    status = budget.setdefault("status", {})
    allowed = int(status.get("disruptionsAllowed", 0)) > 0
    wanted = {
        "type": "DisruptionAllowed",
        "status": "True" if allowed else "False",
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
        "observedGeneration": budget.get("metadata", {}).get("generation", 1),
    }
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
    previous = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    if previous is not None and previous.get("status") == wanted["status"]:
        wanted["lastTransitionTime"] = previous.get("lastTransitionTime", now_rfc3339())
    else:
        wanted["lastTransitionTime"] = now_rfc3339()
    status["conditions"] = [*conditions, wanted]
