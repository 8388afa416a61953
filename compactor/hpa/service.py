"""One run of the HPA floor, exactly what `main.hpa_floor` and `python -m compactor hpa` do.

Order, as for the compactor: settings and configuration are checked before
anything is read (bad input = zero writes); a dry run takes no Lease and
writes nothing (no patch, no Event); otherwise the `node-compactor-hpa`
Lease is held for the run. Cluster access and the configuration sources
(`dryRun` of the compactor's configuration applies here too) are the
compactor's own (`compactor.service`, `compactor.settings.config`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from compactor import service as compactor_service
from compactor.errors import CompactorError, LeaseHeldError
from compactor.hpa import planner, report
from compactor.hpa import settings as hpa_settings
from compactor.hpa.model import Answer, Decision, Plan, Query
from compactor.settings import config as config_source

if TYPE_CHECKING:
    from compactor.hpa.cluster import HpaCluster

log = logging.getLogger(__name__)

ENV_PROJECT = "GOOGLE_CLOUD_PROJECT"
QUERY_SHARE_OF_BUDGET = 0.5  # the rest is for reading, patching and Events


class QueryRunner:
    """What the service needs of the Prometheus adapter (tests pass their own endpoint)."""

    def __init__(self, run: Callable[[list[Query]], dict[Query, Answer]], close: Callable[[], None]) -> None:
        self.run = run
        self.close = close


@dataclass(frozen=True)
class Outcome:
    written: tuple[str, ...] = ()  # HPA keys patched
    failed_writes: tuple[tuple[str, str], ...] = ()  # (HPA key, why)
    dry_run: bool = False


@dataclass(frozen=True)
class HpaRunResult:
    plan: Plan
    outcome: Outcome
    report: dict[str, Any]


def prometheus_from(env: Mapping[str, str], deadline: float, *, gke_cluster: str | None = None) -> QueryRunner:
    """PROMETHEUS_SERVER_URL, or Managed Prometheus in the cluster's project (with a monitoring.read token).

    Nothing here fails the run: without a project, or without Google credentials, each query that needs
    them is answered with the reason, and its HPA is left as it is.
    """
    from compactor.hpa import prometheus

    server = env.get(hpa_settings.ENV_SERVER_URL)
    project = _project(env, gke_cluster)
    url = server or (prometheus.managed_prometheus_url(project) if project else None)
    needs_google = url is None or prometheus.is_google(url)
    querier = prometheus.Querier(
        url,
        token_source=prometheus.google_token_source() if needs_google else None,
        deadline=deadline,
        no_default=(
            f"no Prometheus to query: set {hpa_settings.ENV_SERVER_URL}, or {compactor_service.ENV_CLUSTER} / "
            f"{ENV_PROJECT} for Managed Service for Prometheus in that project"
        ),
    )
    return QueryRunner(querier.run, querier.close)


def _project(env: Mapping[str, str], gke_cluster: str | None) -> str | None:
    cluster = gke_cluster or env.get(compactor_service.ENV_CLUSTER)
    if cluster:
        from compactor.gcp import gke

        return gke.parse_cluster_name(cluster).project
    return env.get(ENV_PROJECT) or None


def run(
    env: Mapping[str, str],
    *,
    connector: compactor_service.Connector,
    config_file: str | None = None,
    force_dry_run: bool = False,
    gke_cluster: str | None = None,
    clock: Callable[[], datetime] = compactor_service.utcnow,
    monotonic: Callable[[], float] = time.monotonic,
    querier_factory: Callable[[Mapping[str, str], float], QueryRunner] | None = None,
) -> HpaRunResult:
    started = monotonic()
    try:
        result = _run(env, connector, config_file, force_dry_run, gke_cluster, clock, monotonic, querier_factory)
    except LeaseHeldError as error:
        log.warning(error.message, extra={"fields": {"event": "run-skipped", "job": "hpa-floor"}})
        raise
    except CompactorError as error:
        log.error(
            "HPA floor run failed: %s",
            error.message,
            extra={"fields": {"event": "run-failed", "job": "hpa-floor", "problems": error.problems}},
        )
        raise
    plan, outcome = result.plan, result.outcome
    log.info(
        "HPA floor run finished: %d raised, %d lowered, %d restored, %d left as they were after a failure",
        plan.count("raise"),
        plan.count("lower"),
        plan.count("restore"),
        plan.count("fail"),
        extra={
            "fields": {
                "event": "run-summary",
                "job": "hpa-floor",
                "hpas": len(plan.decisions),
                "raised": plan.count("raise"),
                "lowered": plan.count("lower"),
                "restored": plan.count("restore"),
                "unchanged": plan.count("none"),
                "skipped": plan.count("skip"),
                "failed": plan.count("fail"),
                "written": len(outcome.written),
                "failedWrites": len(outcome.failed_writes),
                "dryRun": outcome.dry_run,
                "durationSeconds": round(monotonic() - started, 3),
            }
        },
    )
    return result


def _run(
    env: Mapping[str, str],
    connector: compactor_service.Connector,
    config_file: str | None,
    force_dry_run: bool,
    gke_cluster: str | None,
    clock: Callable[[], datetime],
    monotonic: Callable[[], float],
    querier_factory: Callable[[Mapping[str, str], float], QueryRunner] | None,
) -> HpaRunResult:
    from compactor.gcp import firestore
    from compactor.hpa.cluster import LEASE_NAME, HpaCluster
    from compactor.kube.client import new_run_id

    started = monotonic()
    settings = hpa_settings.from_env(env)
    budget_seconds = compactor_service.run_budget(env)
    loaded = config_source.load_with_source(
        env, config_file=config_file, read_firestore=firestore.read_config_document, required=False
    )
    config = loaded.config
    warnings = [notice] if (notice := loaded.notice()) is not None else []
    for warning in warnings:
        log.warning(warning, extra={"fields": {"event": "input-warning", "job": "hpa-floor"}})
    dry_run = force_dry_run or config.dry_run
    namespace = compactor_service.lease_namespace(env)
    holder = new_run_id()

    connection = connector()
    try:
        cluster = HpaCluster(connection.api_client)
        # A 429 on the Lease is waited out only while the run's budget lasts.
        cluster.kube.read_budget = lambda: started + budget_seconds - monotonic()
        if not dry_run:
            cluster.kube.acquire_lease(
                namespace,
                holder,
                duration_seconds=budget_seconds + compactor_service.LEASE_MARGIN_SECONDS,
                now=clock(),
                name=LEASE_NAME,
            )
        try:
            state = cluster.read()
            queries = planner.queries(state, settings)
            answers: dict[Query, Answer] = {}
            if queries:
                deadline = started + budget_seconds * QUERY_SHARE_OF_BUDGET
                factory = querier_factory or (lambda e, d: prometheus_from(e, d, gke_cluster=gke_cluster))
                runner = factory(env, deadline)
                try:
                    answers = runner.run(queries)
                finally:
                    runner.close()
            plan = planner.plan(state, settings, answers)
            if not dry_run and any(d.patch is not None or d.action == "fail" for d in plan.decisions):
                # The queries may have taken a while: prove the Lease is still ours before writing.
                cluster.kube.renew_lease(
                    namespace,
                    holder,
                    duration_seconds=budget_seconds + compactor_service.LEASE_MARGIN_SECONDS,
                    now=clock(),
                    name=LEASE_NAME,
                )
            outcome = _apply(cluster, plan, dry_run=dry_run, clock=clock)
        finally:
            if not dry_run:
                cluster.kube.release_lease(namespace, holder, name=LEASE_NAME)
    finally:
        connection.close()
    document = report.to_dict(plan, outcome=outcome_dict(outcome), dry_run=dry_run)
    # Its configuration's `dryRun` applies here too: say where it came from, as the compactor's report does.
    document["configSource"] = loaded.source
    document["warnings"] = warnings
    return HpaRunResult(plan, outcome, document)


def outcome_dict(outcome: Outcome) -> dict[str, Any]:
    return {
        "written": list(outcome.written),
        "failedWrites": [{"hpa": key, "why": why} for key, why in outcome.failed_writes],
    }


_EVENT_REASONS = {"raise": "MinReplicasRaised", "lower": "MinReplicasLowered", "restore": "MinReplicasRestored"}


def _apply(cluster: HpaCluster, plan: Plan, *, dry_run: bool, clock: Callable[[], datetime]) -> Outcome:
    from compactor.hpa.cluster import PatchFailedError

    written: list[str] = []
    failed: list[tuple[str, str]] = []
    for decision in plan.decisions:
        hpa = decision.hpa
        fields = _log_fields(decision, dry_run)
        if decision.action == "fail":
            log.warning("HPA %s left as it is: %s", hpa.key, decision.reason, extra={"fields": fields})
            if not dry_run:
                cluster.event(hpa, reason="MinReplicasUnchanged", message=decision.reason, warning=True, now=clock())
            continue
        if decision.patch is None:
            continue
        if dry_run:
            log.info("dry run: HPA %s would change: %s", hpa.key, decision.reason, extra={"fields": fields})
            continue
        try:
            cluster.patch(hpa, decision.patch)
        except PatchFailedError as error:
            why = str(error)
            failed.append((hpa.key, why))
            log.warning(
                "HPA %s left as it is: %s", hpa.key, why, extra={"fields": {**fields, "event": "hpa-write-failed"}}
            )
            cluster.event(hpa, reason="MinReplicasUnchanged", message=f"patch failed: {why}", warning=True, now=clock())
            continue
        written.append(hpa.key)
        log.info("HPA %s: %s", hpa.key, decision.reason, extra={"fields": fields})
        cluster.event(hpa, reason=_EVENT_REASONS[decision.action], message=decision.reason, warning=False, now=clock())
    return Outcome(tuple(written), tuple(failed), dry_run)


def _log_fields(decision: Decision, dry_run: bool) -> dict[str, Any]:
    hpa = decision.hpa
    return {
        "event": f"hpa-{decision.action}",
        "job": "hpa-floor",
        "namespace": hpa.namespace,
        "hpa": hpa.name,
        "minReplicas": hpa.min_replicas,
        "newMinReplicas": decision.new_min_replicas,
        "reason": decision.reason,
        "dryRun": dry_run,
    }
