"""One run of node-compactor, exactly what the function and `python -m compactor run` do.

Order matters for safety: the configuration is read and validated before
anything is written (bad configuration = zero writes); a dry run takes no
Lease and writes nothing; otherwise the `node-compactor` Lease is held for
the whole run so two runs never act at once.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from compactor import report
from compactor.actuation.executor import Budget, Executor, Guard, Outcome
from compactor.core import configcheck, path, planner, proof
from compactor.core.model import Snapshot
from compactor.core.plan import Plan
from compactor.errors import (
    BadInputError,
    ClusterAccessError,
    CompactorError,
    KubeconfigError,
    LeaseHeldError,
)
from compactor.gcp import pricefile
from compactor.kube import integrity, watching
from compactor.kube.snapshot import paused_gc
from compactor.settings import config as config_source
from compactor.settings import names

if TYPE_CHECKING:
    from compactor.kube.client import ListMethod

log = logging.getLogger(__name__)

ENV_CLUSTER = "COMPACTOR_CLUSTER"
ENV_ENDPOINT_MODE = "COMPACTOR_ENDPOINT_MODE"
ENV_RUN_BUDGET = "COMPACTOR_RUN_BUDGET_SECONDS"
ENV_LEASE_NAMESPACE = "COMPACTOR_LEASE_NAMESPACE"
ENV_LIST_METHOD = "COMPACTOR_LIST_METHOD"
DEFAULT_RUN_BUDGET_SECONDS = 240  # Cloud Scheduler's attempt deadline and the function timeout sit above it
# The longest function timeout the Terraform module allows is 1770 s (Cloud Scheduler's attempt deadline
# of at most 1800 s, less 30); a run must end before the platform kills it mid-write.
MAX_RUN_BUDGET_SECONDS = 1740
# A kubeconfig is a few KiB; this bounds what a wrong path (a device, a huge file) can make us read.
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_LEASE_NAMESPACE = "kube-system"
LEASE_MARGIN_SECONDS = 30


@dataclass(frozen=True)
class ClusterConnection:
    api_client: Any  # kubernetes.client.ApiClient
    pool_autoscaling: Mapping[str, Any] | None  # from GKE; None when unknown
    close: Callable[[], None]


Connector = Callable[[], ClusterConnection]


@dataclass(frozen=True)
class RunResult:
    plan: Plan
    report: dict[str, Any]
    outcome: Outcome


def utcnow() -> datetime:
    return datetime.now(UTC)


def run_budget(env: Mapping[str, str]) -> int:
    text = env.get(ENV_RUN_BUDGET) or str(DEFAULT_RUN_BUDGET_SECONDS)
    try:
        seconds = int(text)
    except ValueError:
        raise BadInputError(f"{ENV_RUN_BUDGET}: {text!r} is not a whole number of seconds") from None
    if seconds < 30:
        raise BadInputError(f"{ENV_RUN_BUDGET}: {seconds} is too short; give a run at least 30 seconds")
    if seconds > MAX_RUN_BUDGET_SECONDS:
        raise BadInputError(
            f"{ENV_RUN_BUDGET}: {seconds} is too long; at most {MAX_RUN_BUDGET_SECONDS} seconds, because a run "
            "must end before the function's timeout (at most 1770 s under Cloud Scheduler's 1800 s attempt "
            "deadline) and the Lease it holds must expire soon after a crashed run"
        )
    return seconds


def lease_namespace(env: Mapping[str, str], given: str | None = None) -> str:
    """The namespace of the Leases: `given` (a command-line flag), else COMPACTOR_LEASE_NAMESPACE, else
    kube-system; a name the API server would refuse is bad input, found before any request."""
    if given:
        source, namespace = "--lease-namespace", given
    else:
        source, namespace = ENV_LEASE_NAMESPACE, env.get(ENV_LEASE_NAMESPACE) or DEFAULT_LEASE_NAMESPACE
    problem = names.namespace_problem(namespace)
    if problem is not None:
        raise BadInputError(f"{source}: {problem}")
    return namespace


def list_method(env: Mapping[str, str]) -> ListMethod:
    """How the cluster is read: `paged-list` (the default) or `watch-list` (streaming lists, KEP-3157)."""
    from compactor.kube import client as kube

    text = env.get(ENV_LIST_METHOD) or kube.DEFAULT_LIST_METHOD
    for method in kube.LIST_METHODS:
        if text == method:
            return method
    raise BadInputError(f"{ENV_LIST_METHOD}: {text!r} is not one of {', '.join(kube.LIST_METHODS)}")


def connector_from(
    env: Mapping[str, str], *, kubeconfig: str | None = None, gke_cluster: str | None = None
) -> Connector:
    """How to reach the cluster: GKE (`--gke` / COMPACTOR_CLUSTER), else a kubeconfig, else in-cluster."""
    cluster = gke_cluster or (None if kubeconfig else env.get(ENV_CLUSTER))
    if cluster:
        from compactor.gcp import gke

        gke.parse_cluster_name(cluster)  # a bad name is bad input, found before any call
        mode = env.get(ENV_ENDPOINT_MODE) or "dns"

        def connect_gke() -> ClusterConnection:
            connection = gke.connect(cluster, endpoint_mode=mode)
            return ClusterConnection(connection.api_client, connection.pool_autoscaling, connection.close)

        return connect_gke

    def connect_kube() -> ClusterConnection:
        api_client = kubernetes_client(kubeconfig, env)
        return ClusterConnection(api_client, None, api_client.close)

    return connect_kube


def kubernetes_client(kubeconfig: str | None, env: Mapping[str, str]) -> Any:
    from kubernetes import client
    from kubernetes import config as kube_config

    configuration = client.Configuration()
    if kubeconfig is None and env.get("KUBERNETES_SERVICE_HOST") and not env.get("KUBECONFIG"):
        try:
            kube_config.load_incluster_config(client_configuration=configuration)
        except (kube_config.ConfigException, OSError, ValueError) as error:
            raise ClusterAccessError(f"cannot use the in-cluster service account: {error}") from error
        return client.ApiClient(configuration)
    # The client reads KUBECONFIG only when it is imported; this run's environment decides.
    path = kubeconfig or env.get("KUBECONFIG") or None
    if path is None and not os.path.exists(os.path.expanduser(DEFAULT_KUBECONFIG)):
        raise ClusterAccessError(
            f"no cluster to talk to (no {DEFAULT_KUBECONFIG}): set "
            f"{ENV_CLUSTER}=projects/P/locations/L/clusters/C, KUBECONFIG, or pass --kubeconfig / --gke"
        )
    shown = path or DEFAULT_KUBECONFIG
    files = [os.path.expanduser(file) for file in (path or shown).split(os.pathsep) if file]
    for file in files:
        # In a KUBECONFIG list the client skips missing files; a single path must exist.
        if len(files) == 1 or os.path.exists(file):
            _check_kubeconfig_file(file)
    from compactor.kube import kubeconfig as checks

    checks.check(path or shown, shown)
    try:
        with checks.exec_plugin_watch() as exec_plugin_failed:
            kube_config.load_kube_config(config_file=path, client_configuration=configuration)
    except Exception as error:  # whatever the loader trips on, it is the file that is wrong
        raise KubeconfigError(f"kubeconfig {shown}: {_kubeconfig_problem(error)}") from error
    if exec_plugin_failed:
        # The loader goes on without credentials; every request would then be refused as anonymous.
        raise ClusterAccessError(f"kubeconfig {shown}: {checks.EXEC_PLUGIN_FAILED}")
    return client.ApiClient(configuration)


def _check_kubeconfig_file(path: str) -> None:
    """A kubeconfig path must name a readable regular file of sane size (`/dev/zero` would never end)."""
    try:
        status = os.stat(path)
    except OSError as error:
        raise KubeconfigError(f"kubeconfig {path}: {error.strerror or error}") from error
    if not stat.S_ISREG(status.st_mode):
        raise KubeconfigError(f"kubeconfig {path}: not a regular file")
    if status.st_size > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(
            f"kubeconfig {path}: {status.st_size} bytes is not a kubeconfig (at most {MAX_KUBECONFIG_BYTES} bytes)"
        )


def _kubeconfig_problem(error: Exception) -> str:
    """What the kubernetes client's loader found wrong, said without a traceback."""
    import binascii

    import yaml

    if isinstance(error, yaml.YAMLError):
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        return f"not valid YAML or JSON{at}: {problem}"
    if isinstance(error, binascii.Error):
        return f"certificate or key data is not valid base64 ({error})"
    if isinstance(error, TypeError | AttributeError | KeyError | IndexError):
        return f"not a kubeconfig (clusters, users, contexts and current-context expected): {error}"
    return str(error).rstrip(".") or type(error).__name__


def run(
    env: Mapping[str, str],
    *,
    connector: Connector,
    config_file: str | None = None,
    force_dry_run: bool = False,
    clock: Callable[[], datetime] = utcnow,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    first_backoff: float = 1.0,
) -> RunResult:
    started = monotonic()
    try:
        result = _run(env, connector, config_file, force_dry_run, clock, monotonic, sleep, first_backoff, started)
    except LeaseHeldError as error:
        log.warning(error.message, extra={"fields": {"event": "run-skipped"}})
        raise
    except CompactorError as error:
        log.error(
            "run failed: %s",
            error.message,
            extra={"fields": {"event": "run-failed", "problems": error.problems}},
        )
        raise
    decision = result.report["decision"]
    outcome = result.outcome
    log.info(
        "run finished: %s%s",
        decision["action"],
        f" {decision['node']}" if decision["node"] else "",
        extra={
            "fields": {
                "event": "run-summary",
                "action": decision["action"],
                "node": decision["node"],
                "pool": decision["pool"],
                "reason": decision["reason"],
                "dryRun": outcome.dry_run,
                "marksAdded": len(outcome.marks_added),
                "marksRemoved": len(outcome.marks_removed),
                "evicted": len(outcome.evicted),
                "waiting": len(outcome.waiting),
                "stale": outcome.stale,
                "heldBy": (result.report.get("heldBy") or {}).get("kind"),
                "nodesAwaitingRemoval": len(result.report.get("awaitingRemoval") or ()),
                **_money(result.report),
                "read": result.report.get("read"),
                "durationSeconds": round(monotonic() - started, 3),
            }
        },
    )
    return result


def _money(report: Mapping[str, Any]) -> dict[str, Any]:
    """What the cluster costs per hour now and what this run's action saves, for the run-summary line (the
    log-based metrics and the dashboard read them): the priced nodes' prices summed, how many nodes have no
    price (a GPU node without its pool's pricePerHour, an unknown machine type), and the saving per hour of the
    drain or of the replacement asked for (None when the run starts neither)."""
    nodes = report.get("nodes") or ()
    prices = [node.get("pricePerHour") for node in nodes]
    saving = (report.get("decision") or {}).get("savingsPerHour")
    replacement = report.get("replacement") or {}
    if saving is None and replacement.get("step") == "create":
        saving = replacement.get("savingsPerHour")
    return {
        "currency": report.get("currency", "USD"),
        "clusterPricePerHour": round(sum(price for price in prices if price is not None), 6),
        "unpricedNodes": sum(1 for price in prices if price is None),
        "savingsPerHour": saving,
    }


def _run(
    env: Mapping[str, str],
    connector: Connector,
    config_file: str | None,
    force_dry_run: bool,
    clock: Callable[[], datetime],
    monotonic: Callable[[], float],
    sleep: Callable[[float], None],
    first_backoff: float,
    started: float,
) -> RunResult:
    from compactor.gcp import firestore
    from compactor.kube.client import Cluster, new_run_id

    budget_seconds = run_budget(env)
    method = list_method(env)
    loaded = config_source.load_with_source(env, config_file=config_file, read_firestore=firestore.read_config_document)
    config = loaded.config
    dry_run = force_dry_run or config.dry_run
    if dry_run and not config.dry_run:
        config = config.model_copy(update={"dry_run": True})
    budget = Budget(deadline=started + budget_seconds, monotonic=monotonic, sleep=sleep)
    namespace = lease_namespace(env)
    holder = new_run_id()

    connection = connector()
    try:
        cluster = Cluster(connection.api_client)
        cluster.read_budget = budget.remaining
        cluster.sleep = budget.sleep
        cluster.list_method = method
        lease_seconds = budget_seconds + LEASE_MARGIN_SECONDS
        guard: Guard | None = None
        if not dry_run:
            cluster.acquire_lease(namespace, holder, duration_seconds=lease_seconds, now=clock())

            def renew(action: str) -> None:
                cluster.renew_lease(namespace, holder, duration_seconds=lease_seconds, now=clock())

            guard = renew

        try:
            # Deployments, ReplicaSets and claims are read only for pools with surgeSingleReplicas.
            reading = monotonic()
            snapshot = integrity.check_unique(
                cluster.read_snapshot(connection.pool_autoscaling, workloads=config.surges)
            )
            read_seconds = monotonic() - reading  # how long a proof's read takes, until the executor times one
            warnings = input_warnings(loaded, snapshot)
            # The snapshot is read-only from here on: keep the collector from rescanning it while planning.
            gc.freeze()
            # Planning makes no reference cycles: the collector would only rescan the planner's indexes.
            with paused_gc():
                prices = pricefile.for_config(config)
                proofs = proof.Memo()  # kept for the plan made again before a drain
                if dry_run:
                    # A dry run is how people look before they let it act: show where the drains would lead.
                    plan = path.plan_with_path(snapshot, config, now=clock(), prices=prices)
                else:
                    plan = planner.plan(snapshot, config, now=clock(), prices=prices, proofs=proofs)
            for warning in plan.compute_class_warnings:  # the report lists them too
                log.warning(warning, extra={"fields": {"event": "compute-class-warning"}})
            # Later batches of a drain are proven on this read kept current by watches (started only when the
            # first such proof is due), on their own connections: long streams must not hold the pool's.
            watcher = cluster.watcher()
            proof_state = watching.ProofState(
                watcher,
                snapshot,
                cluster.list_resource_versions,
                functools.partial(_read_fresh, cluster, connection.pool_autoscaling),
                remaining=budget.remaining,
                confirm_seconds=watching.CONFIRM_SECONDS,
                stall_seconds=watching.STALL_SECONDS,
            )
            executor = Executor(
                cluster,
                config,
                clock=clock,
                budget=budget,
                dry_run=dry_run,
                first_backoff=first_backoff,
                guard=guard,
                proof_state=proof_state,
                deployments=cluster if config.surges else None,
                read_seconds=read_seconds,
                replacements=cluster,
                prices=prices,
                proofs=proofs,
            )
            try:
                outcome = executor.execute(plan, snapshot)
            except CompactorError as error:
                error.report = _with_read(
                    report.to_dict(
                        plan, outcome=executor.outcome.to_dict(), warnings=warnings, config_source=loaded.source
                    ),
                    cluster,
                    proof_state,
                )
                raise
            finally:
                proof_state.close()
                watcher.close()
        finally:
            gc.unfreeze()  # a warm function instance must not keep this run's objects out of collection
            if not dry_run:
                cluster.release_lease(namespace, holder)
    finally:
        connection.close()
    document = report.to_dict(plan, outcome=outcome.to_dict(), warnings=warnings, config_source=loaded.source)
    return RunResult(plan, _with_read(document, cluster, proof_state), outcome)


def _read_fresh(cluster: Any, pool_autoscaling: Mapping[str, Any] | None) -> tuple[Snapshot, dict[str, str], int]:
    """The cluster read again, for a proof the watched state could not serve (`kube.watching.ProofState`):
    the snapshot, each list's resourceVersion (the watches start again there) and its bytes on the wire.
    The report's `read` stays what the run's own read cost; the report's `watch` counts this one."""
    first = cluster.last_read
    try:
        fresh: Snapshot = integrity.check_unique(cluster.read_snapshot(pool_autoscaling))
        stats = cluster.last_read
        return fresh, dict(cluster.list_resource_versions), stats.wire_bytes if stats is not None else 0
    finally:
        cluster.last_read = first


def input_warnings(loaded: config_source.Loaded, snapshot: Snapshot) -> list[str]:
    """What a person should know about this run's input (a source passed over, pools no node carries,
    nodes without the pool label), each logged as a warning and listed in the report's `warnings`."""
    found = [notice] if (notice := loaded.notice()) is not None else []
    found += configcheck.for_snapshot(snapshot, loaded.config)
    for warning in found:
        log.warning(warning, extra={"fields": {"event": "input-warning"}})
    return found


def _with_read(
    run_report: dict[str, Any], cluster: Any, proof_state: watching.ProofState | None = None
) -> dict[str, Any]:
    """The report with `read`: how the cluster was read and what that cost (`kube.ReadStats`); and, when a
    drain proved later batches, `watch`: how their state was kept current and what that cost."""
    if cluster.last_read is not None:
        run_report["read"] = cluster.last_read.to_dict()
    if proof_state is not None and proof_state.asked:
        run_report["watch"] = proof_state.stats.to_dict()
    return run_report
