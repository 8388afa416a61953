"""A real kube-apiserver and its etcd on loopback, loaded with a synthetic cluster, for benchmarks.

    python bench/real_apiserver.py --nodes 500 [--dir DIR] [--no-pod-status] [--no-cache-check]

starts etcd and kube-apiserver (the e2e toolchain's binaries: `tests/e2e/toolchain/build.sh`
builds them into ~/.cache/node-compactor-e2e/<component>-<version>/), loads the `bench.synth`
cluster of that size through the API (namespaces, service accounts and the priority class the
pods name, nodes with their status, PodDisruptionBudgets and their status, pods bound to
their nodes with `spec.nodeName` and then their status), prints the reader's kubeconfig and
waits for Ctrl-C. `bench/live_scale.py --real` uses `control_plane` and `load` from here.

No scheduler, controller manager or kubelet runs: nothing moves the objects once loaded, and
the nodes' status (Ready, allocatable) is what the loader wrote, as kwok's would be. Two
identities, from a static token file: `bench-admin` (system:masters, loads the cluster) and
`node-compactor` (bound by RBAC to exactly `compactor.permissions.RBAC_RULES` plus `watch` on
nodes, pods and PodDisruptionBudgets, for streaming lists), so reads go through API Priority
and Fairness like the function's. Everything listens on 127.0.0.1 only and lives in one
directory (etcd's data on /dev/shm when there is one). A benchmark tool, never a test.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import urllib3

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from bench import synth  # noqa: E402
from compactor import permissions  # noqa: E402

VERSIONS = REPO / "tests" / "e2e" / "toolchain" / "versions.env"
CACHE = Path(os.environ.get("NODE_COMPACTOR_E2E_CACHE") or Path.home() / ".cache" / "node-compactor-e2e")
ADMIN_TOKEN = "bench-admin-token"
READER_TOKEN = "bench-node-compactor-token"
READER_USER = "node-compactor"
START_SECONDS = 180.0
LOAD_CONCURRENCY = 24
# Verbs the reader is given beyond the function's own: streaming lists are watches.
WATCHED = frozenset({("", "nodes"), ("", "pods"), ("policy", "poddisruptionbudgets")})
# Fields the API server sets itself; sent on a create they are refused (resourceVersion) or ignored.
_SERVER_SET = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink")


@dataclass(frozen=True)
class ControlPlane:
    url: str
    directory: Path
    etcd_pid: int
    apiserver_pid: int
    reader_kubeconfig: Path
    admin_kubeconfig: Path


def versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in VERSIONS.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            found[key.strip()] = value.strip()
    return found


def binary(component: str) -> Path:
    pinned = versions()
    version = pinned["ETCD_VERSION"] if component == "etcd" else pinned["KUBERNETES_VERSION"]
    path = CACHE / f"{component}-{version}" / component
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path} is missing: build it with tests/e2e/toolchain/build.sh")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kubeconfig(path: Path, url: str, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "bench", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        "current-context": "bench",
    }
    path.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    return path


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def control_plane(directory: Path | None = None, *, cache_check: bool = True) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver, started in `directory` (a fresh temporary one by default) and stopped after.

    `cache_check=False` turns off kube-apiserver's periodic comparison of its watch cache with etcd
    (feature gate `DetectCacheInconsistency`, beta and on by default since 1.34: k8s.io/apiserver
    pkg/features/kube_features.go). Every 5 to 7.5 minutes it lists every object of a resource from
    etcd and digests both copies (pkg/storage/cacher/delegator.go, `ConsistencyCheckPeriod`): at
    150,000 pods several seconds of CPU and gigabytes allocated, which land in whichever measurement
    is running and are caused by none of them."""
    own = directory is None
    work = Path(tempfile.mkdtemp(prefix="node-compactor-apiserver-")) if directory is None else directory
    work.mkdir(parents=True, exist_ok=True)
    shm = Path("/dev/shm")
    etcd_data = Path(tempfile.mkdtemp(prefix="node-compactor-etcd-", dir=shm if shm.is_dir() else work))
    key = work / "service-account.key"
    if not key.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    (work / "tokens.csv").write_text(
        f'{ADMIN_TOKEN},bench-admin,bench-admin,"system:masters"\n{READER_TOKEN},{READER_USER},{READER_USER}\n'
    )
    etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with open(work / "etcd.log", "wb") as etcd_log:
            etcd = subprocess.Popen(
                [
                    str(binary("etcd")),
                    f"--data-dir={etcd_data}",
                    f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                    "--quota-backend-bytes=8589934592",
                    "--unsafe-no-fsync",  # a benchmark's etcd on tmpfs: durability is not measured
                ],
                stdout=etcd_log,
                stderr=subprocess.STDOUT,
            )
        processes.append(etcd)
        with open(work / "kube-apiserver.log", "wb") as api_log:
            apiserver = subprocess.Popen(
                [
                    str(binary("kube-apiserver")),
                    f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={api_port}",
                    f"--cert-dir={work / 'certs'}",
                    f"--token-auth-file={work / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    f"--service-account-key-file={key}",
                    f"--service-account-signing-key-file={key}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--service-cluster-ip-range=10.96.0.0/16",
                    "--allow-privileged=true",
                    "--enable-priority-and-fairness=true",
                    *([] if cache_check else ["--feature-gates=DetectCacheInconsistency=false"]),
                ],
                stdout=api_log,
                stderr=subprocess.STDOUT,
            )
        processes.append(apiserver)
        url = f"https://127.0.0.1:{api_port}"
        _await_ready(url, apiserver, work / "kube-apiserver.log")
        plane = ControlPlane(
            url,
            work,
            etcd.pid,
            apiserver.pid,
            _kubeconfig(work / "reader.kubeconfig", url, READER_TOKEN),
            _kubeconfig(work / "admin.kubeconfig", url, ADMIN_TOKEN),
        )
        _grant_reader(plane)
        yield plane
    finally:
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(etcd_data, ignore_errors=True)
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _await_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    http = _http(1)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(urllib3.exceptions.HTTPError):
            answer = http.request("GET", f"{url}/readyz", headers=_auth(ADMIN_TOKEN), timeout=5.0, retries=False)
            if answer.status == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver not ready after {START_SECONDS:.0f} s:\n{log.read_text()[-3000:]}")


def _http(concurrency: int) -> urllib3.PoolManager:
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return urllib3.PoolManager(maxsize=concurrency, block=True, cert_reqs="CERT_NONE", retries=False)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"}


def _grant_reader(plane: ControlPlane) -> None:
    rules = []
    for rule in permissions.RBAC_RULES:
        verbs = list(rule.verbs)
        if (rule.api_group, rule.resource) in WATCHED:
            verbs.append("watch")
        rules.append({"apiGroups": [rule.api_group], "resources": [rule.resource], "verbs": verbs})
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": READER_USER}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": READER_USER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_USER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER_USER}],
    }
    http = _http(1)
    base = f"{plane.url}/apis/rbac.authorization.k8s.io/v1"
    _send(http, "POST", f"{base}/clusterroles", {**role, "rules": rules})
    _send(http, "POST", f"{base}/clusterrolebindings", binding)


def _send(http: urllib3.PoolManager, method: str, url: str, body: Any, content_type: str | None = None) -> int:
    headers = _auth(ADMIN_TOKEN)
    if content_type:
        headers["Content-Type"] = content_type
    answer = http.request(method, url, body=orjson.dumps(body), headers=headers, timeout=60.0)
    if answer.status >= 300 and answer.status != 409:
        raise RuntimeError(f"{method} {url}: HTTP {answer.status}: {answer.data[:600]!r}")
    return int(answer.status)


def _collection(item: dict[str, Any]) -> str:
    kind = item["kind"]
    namespace = item["metadata"].get("namespace")
    if kind == "Node":
        return "/api/v1/nodes"
    if kind == "Pod":
        return f"/api/v1/namespaces/{namespace}/pods"
    if kind == "PodDisruptionBudget":
        return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    raise ValueError(kind)


def _for_create(item: dict[str, Any]) -> dict[str, Any]:
    metadata = {key: value for key, value in item["metadata"].items() if key not in _SERVER_SET}
    created = {**item, "metadata": metadata}
    if item["kind"] in ("Pod", "PodDisruptionBudget"):
        created.pop("status", None)  # set afterwards through the status subresource
    return created


@dataclass
class LoadResult:
    created: Counter[str]
    seconds: float
    failures: list[str]


def load(url: str, items: Iterable[dict[str, Any]], *, pod_status: bool = True) -> LoadResult:
    """Create the items (nodes, pods, PodDisruptionBudgets of a `bench.synth` cluster) through the API,
    `LOAD_CONCURRENCY` requests at a time, and what they need first (namespaces, service accounts,
    priority classes). Pods' and PDBs' status go in with a merge patch of the status subresource."""
    started = time.monotonic()
    listed = list(items)
    http = _http(LOAD_CONCURRENCY)
    namespaces = sorted({item["metadata"]["namespace"] for item in listed if item["metadata"].get("namespace")})
    for namespace in namespaces:
        if namespace not in ("default", "kube-system"):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            _send(http, "POST", f"{url}/api/v1/namespaces", body)
    accounts = sorted(
        {
            (item["metadata"]["namespace"], item["spec"].get("serviceAccountName") or "default")
            for item in listed
            if item["kind"] == "Pod"
        }
        | {(namespace, "default") for namespace in namespaces}
    )
    for namespace, account in accounts:
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}
        _send(http, "POST", f"{url}/api/v1/namespaces/{namespace}/serviceaccounts", body)
    classes = {
        (item["spec"].get("priorityClassName"), item["spec"].get("priority") or 0)
        for item in listed
        if item["kind"] == "Pod" and item["spec"].get("priorityClassName")
    }
    for name, value in sorted(classes):
        if not name.startswith("system-"):
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
            _send(http, "POST", f"{url}/apis/scheduling.k8s.io/v1/priorityclasses", {**body, "value": value})
    created: Counter[str] = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def create(item: dict[str, Any]) -> None:
        path = _collection(item)
        try:
            _send(http, "POST", f"{url}{path}", _for_create(item))
            status = item.get("status")
            if item["kind"] in ("Pod", "PodDisruptionBudget") and status and (pod_status or item["kind"] != "Pod"):
                name = item["metadata"]["name"]
                _send(
                    http,
                    "PATCH",
                    f"{url}{path}/{name}/status",
                    {"status": status},
                    "application/merge-patch+json",
                )
        except (RuntimeError, urllib3.exceptions.HTTPError) as error:
            with lock:
                failures.append(str(error)[:600])
            return
        with lock:
            created[item["kind"]] += 1

    order = {"Node": 0, "PodDisruptionBudget": 1, "Pod": 2}
    listed.sort(key=lambda item: order[item["kind"]])
    with ThreadPoolExecutor(max_workers=LOAD_CONCURRENCY) as pool:
        for kind, group in itertools.groupby(listed, key=lambda item: str(item["kind"])):
            list(pool.map(create, group))
            print(f"  loaded {created[kind]:,} {kind} objects", file=sys.stderr, flush=True)
    return LoadResult(created, time.monotonic() - started, failures)


def synthetic_items(nodes: int, pods_per_node: int = 30) -> Iterator[dict[str, Any]]:
    """The nodes, pods and PodDisruptionBudgets of the `bench.synth` cluster of that size."""
    cluster = synth._Cluster(synth.Scale(nodes, nodes * pods_per_node))
    for item in cluster.items():
        if item.get("kind") in ("Node", "Pod", "PodDisruptionBudget"):
            yield item


def load_in_child(url: str, nodes: int, *, pod_status: bool = True) -> dict[str, Any]:
    """`load` in a process of its own: the 150,000 pods' dicts never enter (and never swell) the caller,
    whose children's peak RSS would otherwise start from its size (Linux counts it at exec)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--load", url, "--nodes", str(nodes)]
    answer = subprocess.run(
        [*command, *([] if pod_status else ["--no-pod-status"])], check=True, stdout=subprocess.PIPE, cwd=REPO
    )
    result: dict[str, Any] = orjson.loads(answer.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/real_apiserver.py", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--dir", type=Path, help="keep the certificates, logs and kubeconfigs here")
    parser.add_argument("--no-pod-status", action="store_true", help="leave pods Pending (faster to load)")
    parser.add_argument("--load", metavar="URL", help="only load the cluster into the API server at URL")
    parser.add_argument(
        "--no-cache-check",
        action="store_true",
        help="turn off kube-apiserver's periodic watch cache check against etcd (DetectCacheInconsistency)",
    )
    args = parser.parse_args(argv)
    if args.load:
        result = load(args.load, synthetic_items(args.nodes), pod_status=not args.no_pod_status)
        for failure in result.failures[:5]:
            print(f"  {failure}", file=sys.stderr, flush=True)
        summary = {"created": dict(result.created), "seconds": result.seconds, "failures": len(result.failures)}
        sys.stdout.buffer.write(orjson.dumps(summary) + b"\n")
        return 0
    signal.signal(signal.SIGTERM, lambda _signal, _frame: sys.exit(0))  # so the control plane is stopped
    with control_plane(args.dir, cache_check=not args.no_cache_check) as plane:
        print(
            f"kube-apiserver {plane.url} (pid {plane.apiserver_pid}, etcd pid {plane.etcd_pid}); loading ...",
            file=sys.stderr,
            flush=True,
        )
        print(load_in_child(plane.url, args.nodes, pod_status=not args.no_pod_status), file=sys.stderr, flush=True)
        print(plane.reader_kubeconfig, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
