"""The HPA floor planner: records + settings + query answers -> one decision per HPA. Pure.

It never does I/O, reads no clock, logs nothing, and imports no cluster,
cloud or web library (a test keeps that true). Formulas are
estafette-k8s-hpa-scaler's (main.go, `getMinPodCountBasedOnPrometheusQuery`,
`getMinPodCountBasedOnCurrentPodCount`, `makeHorizontalPodAutoscalerChanges`):

- query floor = ceil(delta + result / requestsPerReplica), when the query is
  set and requestsPerReplica > 0;
- ratio floor = currentReplicas - max(1, floor(currentReplicas x ratio)),
  skipped while the target Deployment rolls out (more than one ReplicaSet
  with replicas) when the rollout check is on;
- new minReplicas = max(floors, lower bound, the owner's base minimum),
  capped at maxReplicas (estafette raises maxReplicas; we never do).

Anything doubtful (an annotation that does not parse, a failed query) leaves
the HPA as it is: a decision `fail` with its reason, never a lower floor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compactor.hpa import settings as hpa_settings
from compactor.hpa.model import (
    BASE_MIN_REPLICAS,
    DELTA,
    DOWNSCALER_PREFIX,
    ENABLED,
    MIN_REPLICAS_REASON,
    PROMETHEUS_QUERY,
    PROMETHEUS_SERVER_URL,
    REQUESTS_PER_REPLICA,
    ROLLOUT_CHECK,
    SCALE_DOWN_MAX_RATIO,
    Action,
    Answer,
    Cluster,
    Decision,
    Floor,
    Hpa,
    Plan,
    Query,
    Settings,
)

# Go's strconv.ParseFloat would also take "NaN", "Inf" and hex; a floor needs a plain finite number.
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_WHOLE = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Spec:
    """An enabled HPA's annotations, parsed."""

    query: str | None
    requests_per_replica: float
    delta: float
    server: str | None
    max_ratio: float | None
    rollout_check: bool
    base: int | None  # our record of the owner's minimum, when we changed it before
    owner_changed: bool = False  # minReplicas is no longer what we set: the owner's edit is the new base


def parse_spec(hpa: Hpa, settings: Settings) -> tuple[Spec | None, list[str]]:
    """The HPA's floor annotations, or the problems that make them unusable (each names the annotation)."""
    notes = hpa.annotations
    problems: list[str] = []

    def number(key: str, default: float) -> float:
        text = notes.get(key)
        if text is None:
            return default
        if not _DECIMAL.fullmatch(text.strip()):
            problems.append(f"annotation {key}: {text!r} is not a number")
            return default
        return float(text)

    query = (notes.get(PROMETHEUS_QUERY) or "").strip() or None
    requests_per_replica = number(REQUESTS_PER_REPLICA, 1.0)  # estafette's defaults: 1 and 0
    delta = number(DELTA, 0.0)
    max_ratio: float | None = None
    if SCALE_DOWN_MAX_RATIO in notes:
        max_ratio = number(SCALE_DOWN_MAX_RATIO, 1.0)
        if not 0 < max_ratio <= 1:
            problems.append(f"annotation {SCALE_DOWN_MAX_RATIO}: {notes[SCALE_DOWN_MAX_RATIO]!r} is not in (0, 1]")
    check_text = notes.get(ROLLOUT_CHECK, "false").strip()
    if check_text not in ("true", "false"):
        problems.append(f'annotation {ROLLOUT_CHECK}: {notes[ROLLOUT_CHECK]!r} is neither "true" nor "false"')
    server = (notes.get(PROMETHEUS_SERVER_URL) or "").strip() or None
    if server is not None:
        problem = hpa_settings.url_problem(server)
        if problem is not None:
            problems.append(f"annotation {PROMETHEUS_SERVER_URL}: {problem}")
        elif not hpa_settings.allowed(server, settings.allowed_hosts):
            problems.append(
                f"annotation {PROMETHEUS_SERVER_URL}: host {hpa_settings.host_of(server)!r} is not in "
                "PROMETHEUS_URL_ALLOWLIST, so no query is sent there"
            )
    base = parse_base(hpa, problems)
    if problems:
        return None, problems
    owner_changed = base is not None and owner_edited(hpa)
    spec = Spec(
        query,
        requests_per_replica,
        delta,
        server,
        max_ratio,
        check_text == "true",
        None if owner_changed else base,
        owner_changed,
    )
    return spec, []


def last_set(hpa: Hpa) -> int | None:
    """The minReplicas we last wrote, from the head of our reason annotation (`7: ...`); None when unknown."""
    head = (hpa.annotations.get(MIN_REPLICAS_REASON) or "").split(":", 1)[0].strip()
    return int(head) if _WHOLE.fullmatch(head) else None


def owner_edited(hpa: Hpa) -> bool:
    """minReplicas differs from what we last wrote: someone else set it since (a person, a GitOps sync)."""
    written = last_set(hpa)
    return written is not None and written != hpa.min_replicas


def parse_base(hpa: Hpa, problems: list[str]) -> int | None:
    text = hpa.annotations.get(BASE_MIN_REPLICAS)
    if text is None:
        return None
    if not _WHOLE.fullmatch(text.strip()) or int(text) < 1:
        problems.append(f"annotation {BASE_MIN_REPLICAS}: {text!r} is not a whole number >= 1")
        return None
    return int(text)


def managed_by_downscaler(hpa: Hpa) -> str | None:
    return next((key for key in sorted(hpa.annotations) if key.startswith(DOWNSCALER_PREFIX)), None)


def queries(cluster: Cluster, settings: Settings) -> list[Query]:
    """The distinct instant queries the plan needs, in a stable order."""
    wanted: dict[Query, None] = {}
    for hpa in cluster.hpas:
        if hpa.annotations.get(ENABLED) != "true" or managed_by_downscaler(hpa):
            continue
        spec, _problems = parse_spec(hpa, settings)
        if spec is not None and spec.query is not None and spec.requests_per_replica > 0:
            wanted[Query(spec.server, spec.query)] = None
    return list(wanted)


def needs_replica_sets(cluster: Cluster) -> bool:
    """Whether any enabled HPA asks for the rollout check (only then are ReplicaSets read)."""
    return any(
        hpa.annotations.get(ENABLED) == "true" and hpa.annotations.get(ROLLOUT_CHECK, "").strip() == "true"
        for hpa in cluster.hpas
    )


def plan(cluster: Cluster, settings: Settings, answers: Mapping[Query, Answer]) -> Plan:
    return Plan(tuple(decide(hpa, cluster, settings, answers) for hpa in cluster.hpas))


def decide(hpa: Hpa, cluster: Cluster, settings: Settings, answers: Mapping[Query, Answer]) -> Decision:
    downscaler = managed_by_downscaler(hpa)
    if downscaler is not None:
        return Decision(hpa, "skip", None, f"kube-downscaler manages it (annotation {downscaler}); left alone")
    if hpa.annotations.get(ENABLED) != "true":
        return _restore(hpa)
    spec, problems = parse_spec(hpa, settings)
    if spec is None:
        return _failed(hpa, problems)
    floors: list[Floor] = []
    query_floor = _query_floor(spec, answers)
    if isinstance(query_floor, str):
        return _failed(hpa, [query_floor])
    floors.append(query_floor)
    floors.append(_ratio_floor(hpa, spec, cluster))
    floors.append(Floor("lowerBound", settings.lower_bound, "MINIMUM_REPLICAS_LOWER_BOUND"))
    base = spec.base if spec.base is not None else hpa.min_replicas
    if spec.owner_changed:
        base_detail = f"the owner's minReplicas (changed from the {last_set(hpa)} we set: the new base)"
    else:
        base_detail = "the owner's minReplicas" + (" (recorded)" if spec.base is not None else "")
    floors.append(Floor("base", base, base_detail))
    wanted = max(floor.value for floor in floors if floor.value is not None)
    new_min = min(wanted, hpa.max_replicas)
    capped = new_min < wanted
    highest = [floor for floor in floors if floor.value == wanted]
    why = _explain(highest[0], capped, wanted, hpa.max_replicas)
    if new_min == hpa.min_replicas:
        return Decision(hpa, "none", new_min, f"minReplicas stays {new_min}: {why}", tuple(floors), capped)
    action: Action = "raise" if new_min > hpa.min_replicas else "lower"
    annotations: dict[str, str | None] = {MIN_REPLICAS_REASON: _record(new_min, floors, why)}
    if spec.base is None:
        annotations[BASE_MIN_REPLICAS] = str(hpa.min_replicas)
    patch = {
        "metadata": {"resourceVersion": hpa.resource_version, "annotations": annotations},
        "spec": {"minReplicas": new_min},
    }
    reason = f"minReplicas {hpa.min_replicas} -> {new_min}: {why}"
    return Decision(hpa, action, new_min, reason, tuple(floors), capped, patch=patch)


def _query_floor(spec: Spec, answers: Mapping[Query, Answer]) -> Floor | str:
    if spec.query is None:
        return Floor("query", None, "no query annotation")
    if spec.requests_per_replica <= 0:
        return Floor("query", None, f"requestsPerReplica {spec.requests_per_replica:g} is not > 0")
    answer = answers.get(Query(spec.server, spec.query))
    if answer is None:
        return f"query {spec.query!r}: no answer"
    if answer.value is None:
        return f"query {spec.query!r}: {answer.problem}"
    exact = spec.delta + answer.value / spec.requests_per_replica
    value = max(0, math.ceil(exact))
    detail = f"ceil({spec.delta:g} + {answer.value:g} / {spec.requests_per_replica:g}) = {value}"
    return Floor("query", value, detail, result=answer.value)


def _ratio_floor(hpa: Hpa, spec: Spec, cluster: Cluster) -> Floor:
    if spec.max_ratio is None:
        return Floor("ratio", None, "no scale-down-max-ratio annotation")
    current = hpa.current_replicas
    if current is None or current < 1:
        return Floor("ratio", None, "status.currentReplicas is not reported yet")
    if spec.rollout_check and hpa.target_kind == "Deployment":
        active = cluster.active_replica_sets.get((hpa.namespace, hpa.target_name), 0)
        if active > 1:
            return Floor(
                "ratio", None, f"Deployment {hpa.target_name} is rolling out ({active} ReplicaSets with replicas)"
            )
    step = max(1, math.floor(current * spec.max_ratio))
    value = current - step
    return Floor("ratio", value, f"{current} - max(1, floor({current} x {spec.max_ratio:g})) = {value}")


def _explain(highest: Floor, capped: bool, wanted: int, max_replicas: int) -> str:
    names = {"query": "query floor", "ratio": "ratio floor", "lowerBound": "lower bound", "base": "owner's minimum"}
    text = f"{names[highest.name]} {highest.value} ({highest.detail})"
    if capped:
        text += f", capped at maxReplicas {max_replicas} (wanted {wanted}; maxReplicas is never raised)"
    return text


def _record(new_min: int, floors: list[Floor], why: str) -> str:
    listed = ", ".join(f"{floor.name}={floor.value if floor.value is not None else '-'}" for floor in floors)
    return f"{new_min}: {why} [{listed}]"[:1000]


def _restore(hpa: Hpa) -> Decision:
    if BASE_MIN_REPLICAS not in hpa.annotations and MIN_REPLICAS_REASON not in hpa.annotations:
        return Decision(hpa, "skip", None, f'not enabled ({ENABLED} is not "true")')
    problems: list[str] = []
    base = parse_base(hpa, problems)
    if problems:
        return _failed(hpa, problems)
    if base is not None and owner_edited(hpa):
        base = None  # the owner set minReplicas since we did: theirs stays
    forget: dict[str, Any] = {"resourceVersion": hpa.resource_version}
    forget["annotations"] = {BASE_MIN_REPLICAS: None, MIN_REPLICAS_REASON: None}
    patch: dict[str, Any] = {"metadata": forget}
    if base is None or base == hpa.min_replicas:
        reason = f'{ENABLED} is no longer "true": minReplicas stays {hpa.min_replicas}; our annotations removed'
        return Decision(hpa, "restore", hpa.min_replicas, reason, patch=patch)
    patch["spec"] = {"minReplicas": min(base, hpa.max_replicas)}
    restored = patch["spec"]["minReplicas"]
    reason = f'{ENABLED} is no longer "true": minReplicas {hpa.min_replicas} -> the owner\'s {restored}'
    return Decision(hpa, "restore", restored, reason, patch=patch)


def _failed(hpa: Hpa, problems: list[str]) -> Decision:
    reason = f"minReplicas left at {hpa.min_replicas}: " + "; ".join(problems)
    return Decision(hpa, "fail", None, reason, problems=tuple(problems))
