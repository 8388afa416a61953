"""What an e2e test does with the real cluster: GKE-like kwok nodes, workloads, node-compactor runs, the audit log.

`KubeCluster` is what the session fixture `kube_cluster` yields (one control plane for the
whole session); `Scenario` is one test's part of it (its namespace and nodes, removed when the
test ends, so that one test's drain never meets the next test). Objects are plain JSON dicts sent
over HTTPS as the admin; node-compactor itself runs as its own RBAC identity.

What it must never do: create a node kwok does not run unless asked, delete a pod that a test
did not create, or hide an API error (every unexpected answer raises ApiError with the body).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e import controlplane
from tests.e2e.controlplane import COMPACTOR_USER, ControlPlane, Process

REPOSITORY = Path(__file__).resolve().parents[2]
POOL_LABEL = "cloud.google.com/gke-nodepool"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MERGE_PATCH = "application/merge-patch+json"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok runs no container


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path}: {status} {body}")
        self.status = status
        self.body = body


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll until `check()` returns something truthy and return it; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting until {what}")
        time.sleep(interval)


def is_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def node_of(pod: Mapping[str, Any]) -> str | None:
    name: str | None = (pod.get("spec") or {}).get("nodeName")
    return name


def name_of(obj: Mapping[str, Any]) -> str:
    name: str = obj["metadata"]["name"]
    return name


@dataclass
class KubeCluster:
    """The session's control plane and what tests do with it.

    - `kubeconfig`: cluster-admin; `compactor_kubeconfig`: node-compactor's identity, bound by
      deploy/rbac.yaml and deploy/rbac-hpa-floor.yaml; `url`; `audit_log` (JSON lines).
    - `request`/`get`/`create`/`patch`/`delete`: the API as the admin.
    - `add_node(...)`: a GKE-like node kwok runs.
    - `compactor(...)`: node-compactor as users run it; `compactor_on_gke(...)`: a run as on GKE, what GKE says
      of the cluster (`gke_cluster(...)`) served by tests/fakegke.
    - `start_process(name, argv, env=...)`: another process (a Cluster Autoscaler), ended by pid
      at the end of the session with the control plane.
    """

    plane: ControlPlane

    @property
    def url(self) -> str:
        return self.plane.url

    @property
    def kubeconfig(self) -> Path:
        return self.plane.admin_kubeconfig

    @property
    def compactor_kubeconfig(self) -> Path:
        return self.plane.compactor_kubeconfig

    @property
    def audit_log(self) -> Path:
        return self.plane.audit_log

    @property
    def workdir(self) -> Path:
        return self.plane.workdir

    @property
    def versions(self) -> dict[str, str]:
        return dict(self.plane.versions)

    def start_process(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Process:
        return self.plane.start_process(name, argv, env=env)

    # -- the API as the admin ---------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, content_type: str | None = None
    ) -> tuple[int, Any]:
        return self.plane.request(method, path, body, token=token, content_type=content_type)

    def _expect(self, method: str, path: str, body: Any, ok: Iterable[int], content_type: str | None = None) -> Any:
        status, answer = self.request(method, path, body, content_type=content_type)
        if status not in ok:
            raise ApiError(method, path, status, answer)
        return answer

    def get(self, path: str) -> Any:
        return self._expect("GET", path, None, (200,))

    def find(self, path: str) -> Any:
        """The object, or None when it does not exist."""
        status, answer = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ApiError("GET", path, status, answer)
        return answer

    def create(self, path: str, obj: Mapping[str, Any]) -> Any:
        return self._expect("POST", path, obj, (200, 201))

    def new_namespace(self, prefix: str) -> str:
        """A namespace named `prefix`-<5 random hex digits>, returned once it can take pods: they are
        refused until the ServiceAccount controller has made the namespace's default account."""
        namespace = f"{prefix}-{uuid.uuid4().hex[:5]}"
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        wait_for(
            f"namespace {namespace} has its default ServiceAccount",
            lambda: self.find(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        )
        return namespace

    def patch(self, path: str, patch: Mapping[str, Any], content_type: str = MERGE_PATCH) -> Any:
        return self._expect("PATCH", path, patch, (200,), content_type)

    def delete(self, path: str) -> None:
        self._expect("DELETE", path, None, (200, 202, 404))

    def items(self, path: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(path)["items"]
        return found

    # -- nodes --------------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        pool: str,
        zone: str = "europe-west1-b",
        instance_type: str = "e2-standard-4",
        cpu: str = "4",
        memory: str = "16Gi",
        pods: str = "110",
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        wait: bool = True,
    ) -> dict[str, Any]:
        """A node as GKE labels it (pool, zone, region, instance type, hostname), run by kwok.

        Allocatable and capacity are `cpu`/`memory`/`pods` (kwok keeps what the node is created
        with). With `wait`, returns once the node is Ready without the not-ready taint.
        """
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    POOL_LABEL: pool,
                    ZONE_LABEL: zone,
                    REGION_LABEL: zone.rsplit("-", 1)[0],
                    INSTANCE_TYPE_LABEL: instance_type,
                    HOSTNAME_LABEL: name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **(labels or {}),
                },
                "annotations": {controlplane.KWOK_NODE_ANNOTATION: controlplane.KWOK_NODE_VALUE, **(annotations or {})},
            },
            "spec": {"taints": [dict(taint) for taint in taints]} if taints else {},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
            },
        }
        created: dict[str, Any] = self.create("/api/v1/nodes", node)
        if wait:
            self.wait_nodes_ready([name])
        return created

    def node(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.get(f"/api/v1/nodes/{name}")
        return found

    def wait_nodes_ready(self, names: Sequence[str], timeout: float = 30.0) -> None:
        def ready() -> bool:
            for name in names:
                node = self.find(f"/api/v1/nodes/{name}")
                if node is None:
                    return False
                conditions = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
                taints = [t["key"] for t in (node.get("spec") or {}).get("taints") or []]
                if conditions.get("Ready") != "True" or "node.kubernetes.io/not-ready" in taints:
                    return False
            return True

        wait_for(f"nodes {', '.join(names)} are Ready", ready, timeout=timeout)

    def delete_node(self, name: str) -> None:
        self.delete(f"/api/v1/nodes/{name}")

    # -- pods and workloads -------------------------------------------------------------------

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={selector}" if selector else ""
        return self.items(f"/api/v1/namespaces/{namespace}/pods{query}")

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return self.items(f"/api/v1/pods?fieldSelector=spec.nodeName={node}")

    def wait_deployment(self, namespace: str, name: str, replicas: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until the Deployment has exactly `replicas` pods, all bound, Running and Ready; return them."""

        def settled() -> list[dict[str, Any]] | None:
            deployment = self.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
            status = deployment.get("status") or {}
            pods = [pod for pod in self.pods(namespace, f"app={name}") if not pod["metadata"].get("deletionTimestamp")]
            if (
                status.get("readyReplicas") == replicas
                and status.get("replicas") == replicas
                and status.get("updatedReplicas") == replicas
                and len(pods) == replicas
                and all(is_ready(pod) for pod in pods)
            ):
                return pods
            return None

        pods: list[dict[str, Any]] = wait_for(
            f"deployment {namespace}/{name} runs {replicas} ready pods", settled, timeout=timeout
        )
        return pods

    # -- node-compactor -----------------------------------------------------------------------

    def compactor(
        self,
        command: str,
        *args: str,
        config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        kubeconfig: Path | None = None,
        timeout: float = 180.0,
    ) -> CompactorRun:
        """`python -m compactor <command> --kubeconfig <its own> [--config FILE] --json ...`, as users run it.

        `kubeconfig`: another identity's (the admin's `self.kubeconfig` for `cleanup`, which people run
        with their own credentials).
        """
        argv = self.compactor_argv(command, *args, config=config, kubeconfig=kubeconfig)
        return self._execute(command, argv, env, timeout)

    def compactor_on_gke(
        self,
        gke_api: str,
        cluster: str,
        *,
        config: Mapping[str, Any],
        env: Mapping[str, str] | None = None,
        timeout: float = 180.0,
    ) -> CompactorRun:
        """A `run` as on GKE (`--gke cluster`), GKE's API played by the tests/fakegke stand-in at `gke_api`,
        which describes `cluster` as `gke_cluster()` does: tests/e2e/gke_run.py."""
        token = self.workdir / "compactor.token"
        token.write_text(self.plane.compactor_token)
        config_file = self.workdir / f"config-{uuid.uuid4().hex[:8]}.json"
        config_file.write_text(json.dumps(config))
        argv = [
            sys.executable,
            "-m",
            "tests.e2e.gke_run",
            "--gke",
            cluster,
            "--gke-api",
            gke_api,
            "--token-file",
            str(token),
            "--config",
            str(config_file),
        ]
        return self._execute("run-on-gke", argv, env, timeout)

    def gke_cluster(self, node_pools: Sequence[Mapping[str, Any]], **fields: Any) -> dict[str, Any]:
        """What GKE's API answers for this control plane (the REST shape of container.v1.Cluster): its IP endpoint
        and CA, the given `nodePools`, and any other top-level `fields` (`autoscaling={...}`)."""
        return {
            "name": "e2e",
            "location": "europe-west1",
            "endpoint": self.url.removeprefix("https://"),
            "masterAuth": {"clusterCaCertificate": base64.b64encode(self.plane.ca_path.read_bytes()).decode()},
            "nodePools": [dict(pool) for pool in node_pools],
            **fields,
        }

    def _execute(self, command: str, argv: list[str], env: Mapping[str, str] | None, timeout: float) -> CompactorRun:
        started = time.monotonic()
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPOSITORY,
            env=compactor_env(env),
            check=False,
        )
        run = CompactorRun(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - started)
        # Kept for whoever reads a failure: <workdir>/runs/<n>-<command>.{json,log}
        runs = self.workdir / "runs"
        runs.mkdir(exist_ok=True)
        stem = runs / f"{len(list(runs.glob('*.log'))) + 1:03d}-{command}"
        stem.with_suffix(".json").write_text(done.stdout)
        stem.with_suffix(".log").write_text(f"$ {' '.join(argv)}\nexit {done.returncode}\n{done.stderr}")
        return run

    def compactor_argv(
        self, command: str, *args: str, config: Mapping[str, Any] | None = None, kubeconfig: Path | None = None
    ) -> list[str]:
        """The command line `compactor()` runs (for a test that starts several at once; env: `compactor_env`)."""
        argv = [
            sys.executable,
            "-m",
            "compactor",
            command,
            "--kubeconfig",
            str(kubeconfig or self.compactor_kubeconfig),
        ]
        if config is not None:
            path = self.workdir / f"config-{uuid.uuid4().hex[:8]}.json"
            path.write_text(json.dumps(config))
            argv += ["--config", str(path)]
        return [*argv, "--json", *args]

    # -- the audit log ------------------------------------------------------------------------

    def audit_mark(self) -> int:
        """A position in the audit log; `audit_events(mark)` returns what came after it."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def audit_events(self, since: int, *, user: str | None = COMPACTOR_USER) -> list[dict[str, Any]]:
        """Audit events written after `since` (by `user`; None: everyone), once every earlier one is in.

        A request's event is written as the request ends; a sentinel request sent now and found in
        the log shows that the requests before it are written too.
        """
        sentinel = f"/api/v1/namespaces/default/configmaps/audit-sentinel-{uuid.uuid4().hex}"
        self.request("GET", sentinel)
        events: list[dict[str, Any]] = []

        def read() -> bool:
            events.clear()
            with open(self.audit_log, "rb") as log:
                log.seek(since)
                for line in log:
                    if not line.endswith(b"\n"):
                        break  # being written
                    event = json.loads(line)
                    if event.get("requestURI") == sentinel:
                        return True
                    events.append(event)
            return False

        wait_for("the audit log has caught up", read, timeout=10)
        return [e for e in events if user is None or e.get("user", {}).get("username") == user]


def compactor_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without node-compactor's and kubectl's settings (the test's own cluster only), plus `extra`."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTOR_", "KUBE", "PROMETHEUS_"))}
    return {**kept, **(extra or {})}


@dataclass
class CompactorRun:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def report(self) -> dict[str, Any]:
        try:
            found: dict[str, Any] = json.loads(self.stdout)
        except ValueError as error:
            raise AssertionError(f"no JSON report (exit {self.exit_code}):\n{self}") from error
        return found

    def __str__(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.exit_code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    __repr__ = __str__  # what an assertion message shows: the whole run


@dataclass
class Scenario:
    """One test's namespace and nodes in the shared cluster; `close()` removes them."""

    cluster: KubeCluster
    namespace: str
    nodes: list[str] = field(default_factory=list)

    def add_node(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """`KubeCluster.add_node` for this test: the node is deleted when the test ends."""
        self.nodes.append(name)
        return self.cluster.add_node(name, **kwargs)

    def add_pool(self, pool: str, count: int, **kwargs: Any) -> list[str]:
        """`count` nodes named `<pool>-<zone letter>-<n>`, like GKE's, created together then waited for."""
        zone = kwargs.get("zone", "europe-west1-b")
        names = [f"{pool}-{zone[-1]}-{index}" for index in range(1, count + 1)]
        for name in names:
            self.add_node(name, pool=pool, wait=False, **kwargs)
        self.cluster.wait_nodes_ready(names)
        return names

    def deployment(
        self,
        name: str,
        *,
        replicas: int,
        cpu: str,
        memory: str = "256Mi",
        pool: str | None = None,
        spread: bool = False,
        prefer_node: str | None = None,
        annotations: Mapping[str, str] | None = None,
        wait: bool = True,
    ) -> list[dict[str, Any]]:
        """A Deployment of `replicas` pause pods labelled app=<name>, on `pool`'s nodes when given.

        `spread`: the scheduler prefers the node with the fewest of these pods (topology spread on
        the hostname, maxSkew 1, ScheduleAnyway), so the pods spread evenly and a scale-up fills
        a new node first; tests check the layout they rely on before they act.
        `prefer_node`: the scheduler prefers that node (preferred node affinity, which a drain's
        proof rightly ignores), where a nodeSelector would pin the pods there for good.
        """
        labels = {"app": name}
        spec: dict[str, Any] = {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "app", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
        }
        if pool is not None:
            spec["nodeSelector"] = {POOL_LABEL: pool}
        if prefer_node is not None:
            term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [prefer_node]}]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
                }
            }
        if spread:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": HOSTNAME_LABEL,
                    # Not DoNotSchedule: with it, kube-scheduler keeps counting a cordoned node as a
                    # domain (nodeTaintsPolicy Ignore), so a drained node's replacements would fit
                    # nowhere until the node is deleted (kubernetes#106127).
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": labels},
                }
            ]
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels, "annotations": dict(annotations or {})}, "spec": spec},
            },
        }
        self.cluster.create(f"/apis/apps/v1/namespaces/{self.namespace}/deployments", body)
        return self.cluster.wait_deployment(self.namespace, name, replicas) if wait else []

    def daemonset(self, name: str, *, cpu: str, pool: str) -> None:
        """A DaemonSet of pause pods labelled app=<name> on `pool`'s nodes (a node agent, as GKE runs several)."""
        labels = {"app": name}
        spec = {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [
                {"name": "agent", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
            ],
        }
        body = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
        }
        self.cluster.create(f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets", body)

    def wait_daemonset(self, name: str, nodes: Sequence[str]) -> None:
        """Wait until the DaemonSet runs one Ready pod on each of `nodes`."""
        wanted = set(nodes)

        def running() -> bool:
            ready = {node_of(pod) for pod in self.pods(name) if is_ready(pod)}
            return wanted <= ready

        wait_for(f"DaemonSet {name} runs on {', '.join(nodes)}", running)

    def scale(self, name: str, replicas: int, *, wait: bool = True) -> list[dict[str, Any]]:
        self.cluster.patch(
            f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{name}", {"spec": {"replicas": replicas}}
        )
        return self.cluster.wait_deployment(self.namespace, name, replicas) if wait else []

    def pdb(
        self, name: str, app: str, *, min_available: int | None = None, max_unavailable: int | None = None
    ) -> dict[str, Any]:
        """A policy/v1 PDB on app=<app>; waits until the disruption controller has computed its status."""
        spec: dict[str, Any] = {"selector": {"matchLabels": {"app": app}}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}
        path = f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets"
        self.cluster.create(path, body)

        def observed() -> dict[str, Any] | None:
            pdb: dict[str, Any] = self.cluster.get(f"{path}/{name}")
            status = pdb.get("status") or {}
            generation = pdb["metadata"].get("generation")
            return pdb if status.get("observedGeneration") == generation and "expectedPods" in status else None

        found: dict[str, Any] = wait_for(f"PDB {name} has a status", observed)
        return found

    def pods(self, app: str | None = None) -> list[dict[str, Any]]:
        return self.cluster.pods(self.namespace, f"app={app}" if app else "")

    def close(self) -> None:
        """Delete the namespace (its workloads and pods) and the nodes, and wait until they are gone."""
        cluster = self.cluster
        cluster.delete(f"/api/v1/namespaces/{self.namespace}")
        for name in self.nodes:
            cluster.delete_node(name)
        wait_for(
            f"namespace {self.namespace} and its nodes are gone",
            lambda: (
                cluster.find(f"/api/v1/namespaces/{self.namespace}") is None
                and all(cluster.find(f"/api/v1/nodes/{name}") is None for name in self.nodes)
            ),
            timeout=60,
        )


class Watcher:
    """Polls the API on a thread while something happens, calling `observe()` each time; `stop()` returns."""

    def __init__(self, observe: Callable[[], None], *, interval: float = 0.05) -> None:
        self.observe = observe
        self.interval = interval
        self.polls = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="e2e-watcher", daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.observe()
                self.polls += 1
            except BaseException as error:  # re-raised in the test's thread
                self.error = error
                return
            self._stop.wait(self.interval)
