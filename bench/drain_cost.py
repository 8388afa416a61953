"""What one drain run's proofs cost kube-apiserver: the whole cluster read again before later batches.

    python bench/drain_cost.py --nodes 5000 [--trees before=DIR,after=.] [--budget 240] [--repeat 3]
    python bench/drain_cost.py --nodes 1000 --cases free,held   # a check: its own control plane, < 8 min
    python bench/drain_cost.py --attach URL,APISERVER_PID[,ETCD_PID] --nodes 5000 ...   # a server loaded already

`bench.real_apiserver` starts kube-apiserver and etcd (the e2e toolchain's binaries) and loads
the `bench.synth` cluster of that size through the API (or `--attach` names one running, loaded
with the same size). Then, for each code tree (`--trees NAME=DIR`: a checkout of node-compactor,
`git archive <commit> compactor | tar -x -C DIR` for an older commit) and each case, one drain run
(`service.run`, not a dry run, node-compactor's RBAC identity, `--budget` seconds) in a child
process of its own with the tree's `compactor` package:

- `free`: a node the plan would drain, cordoned and stamped `drain-started-at` as the run that
  started its drain left it, whose pods' PodDisruptionBudgets allow 1,000 disruptions: its pods
  evict freely (no kubelet runs, so they stay terminating; nothing replaces them);
- `free110` (or any count): the same, on a node first filled with copies of its ReplicaSet pods
  (bound, Running) up to that many pods to evict;
- `held`: the same on another such node, every pod held by a PodDisruptionBudget allowing none
  (the synth PDBs covering them set so, one PDB made for each pod without one): every eviction is
  answered 429 for the whole budget.

Per run: the full re-reads of the cluster the executor made for its proofs (a tree from before
watches: each one's wall time and bytes on the wire, the reader's `ReadStats`, counted in the child
around `service._read_again`; a tree with watches: the report's `watch`, its streams' bytes and the
fresh reads it fell back to), `runBytesOnWire` (every byte the run read: lists and watch streams),
`fullReadBytesOnWire` (the run's own read, one full list of the same cluster) and their ratio
`fullReads`, the run's wall time, and the CPU kube-apiserver and etcd used over the run
(`apiserverCpu`, /proc/PID/stat) less their idle rate measured just before; then, in another child,
one full read alone (`fullRead`: its kube-apiserver CPU less the same idle rate, bytes and time)
and the run's CPU in such reads (`fullReadsOfCpu`); both also with the collection of their own garbage
counted as bench/api_cost.py counts it (`apiserverCpuWithGc`, `fullReadsOfCpuWithGc`, see
`Collections`), each window started on a heap just collected (`/debug/pprof/heap?gc=1`), so that its
raw CPU pays for no earlier window's garbage; the child's peak RSS is `peakMiB`. After each run the node and its
pods are deleted, as the Cluster Autoscaler would remove it, so the next run starts from one
drain. `--repeat N` makes N such runs of each case and tree, each followed by its own lone full read,
and prints the median of each ratio with its range. A first run, not counted (`warm-up`), marks the
cluster's underutilized nodes as any first run on a cluster does, so that the runs measured are those
of a cluster node-compactor already runs in (`--no-warm-up` measures it too). Each run's idle rate is
the median of five 2 s windows. Its own control plane runs with kube-apiserver's watch cache check off
(`real_apiserver.control_plane(cache_check=False)`: a background listing of every pod that lands in
whichever window is measured); start an attached one with `python bench/real_apiserver.py
--no-cache-check` for the same. Writes `bench/out/drain-cost/results.json`. A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import orjson
import urllib3

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from bench import api_cost, live_scale, real_apiserver, synth  # noqa: E402

OUT_DIR = synth.OUT_DIR / "drain-cost"
IDLE_SECONDS = 10.0
IDLE_WINDOWS = 5
DRAIN_STARTED_AT = "node-compactor.dev/drain-started-at"
NOT_READY = "node.kubernetes.io/not-ready"

# The child: one `service.run` with the tree's compactor, each proof's read counted.
CHILD = r"""
import logging, resource, sys, time, orjson, urllib3
from compactor.errors import CompactorError
from datetime import UTC, datetime, timedelta
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
from compactor import service
from compactor.kube import integrity
kubeconfig, config, budget, now = sys.argv[1:5]
reads = []
def counted(cluster, pool_autoscaling):
    first = cluster.last_read
    started = time.perf_counter()
    try:
        return integrity.check_unique(cluster.read_snapshot(pool_autoscaling))
    finally:
        reads.append({"seconds": round(time.perf_counter() - started, 3), **cluster.last_read.to_dict()})
        cluster.last_read = first
if hasattr(service, "_read_again"):  # a tree from before watches: every proof read the cluster this way
    service._read_again = counted
env = {"COMPACTOR_CONFIG": open(config).read(), "COMPACTOR_RUN_BUDGET_SECONDS": budget}
connector = service.connector_from({}, kubeconfig=kubeconfig)
moment = datetime.fromisoformat(now)
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
started = time.perf_counter()
try:
    report, failed = service.run(env, connector=connector, clock=lambda: moment).report, None
except CompactorError as error:  # a run that failed still reports what it did
    report, failed = error.report or {}, error.message
outcome = report.get("outcome") or {}
sys.stdout.buffer.write(orjson.dumps({
    "seconds": round(time.perf_counter() - started, 3),
    "failed": failed,
    "decision": report.get("decision"),
    "read": report.get("read"),
    "watch": report.get("watch"),
    "proofs": outcome.get("proofs"),
    "reads": reads,
    "evicted": len(outcome.get("evicted") or ()),
    "waiting": len(outcome.get("waiting") or {}),
    "waitingFor": sorted(set((outcome.get("waiting") or {}).values()))[:3],
    "interrupted": outcome.get("interrupted"),
    "held": outcome.get("held"),
    "peakMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}) + b"\n")
"""


class Admin:
    """The loaded cluster as `bench-admin` sees it: the few reads and writes the setup needs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = real_apiserver._http(8)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = {**real_apiserver._auth(real_apiserver.ADMIN_TOKEN), "Content-Type": content_type}
        data = None if body is None else orjson.dumps(body)
        answer = self.http.request(method, f"{self.url}{path}", body=data, headers=headers, timeout=120.0)
        if answer.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {answer.status}: {answer.data[:400]!r}")
        return orjson.loads(answer.data)

    def merge(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, "application/merge-patch+json")


def candidates(kubeconfig: Path, config: dict[str, Any], now: datetime) -> list[str]:
    """Nodes the planner would drain on the loaded cluster: its choice, then those ranked after it
    (blocked by nothing else), most pods to move first."""
    from compactor import service
    from compactor.core import planner
    from compactor.kube.client import Cluster
    from compactor.settings.config import Config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    cluster = Cluster(service.kubernetes_client(str(kubeconfig), {}))
    # Without the PodDisruptionBudgets (`prepare` sets those of the chosen nodes' pods): many synth PDBs
    # allow no disruption now, which would leave few nodes the planner proves a fit for.
    snapshot = msgspec.structs.replace(cluster.read_snapshot(), pdbs=())
    plan = planner.plan(snapshot, Config.model_validate(config), now=now)
    moving = Counter(pod.node_name for pod in snapshot.pods if not pod.stays_on_node)
    found = [
        node.name
        for node in plan.nodes
        if node.candidate or (node.blockers and all(b.startswith("ranked after") for b in node.blockers))
    ]
    found.sort(key=lambda name: -moving[name])
    counts = [moving[name] for name in found[:6]]
    print(f"  plan: {plan.decision.action} {plan.decision.node}; {len(found)} candidates, {counts}", file=sys.stderr)
    return found


def untaint(admin: Admin) -> int:
    """Take kube-apiserver's `node.kubernetes.io/not-ready` taint off the loaded nodes, as the node
    controller does once a kubelet reports Ready (none runs here): with it no pod fits anywhere."""

    def ready(node: dict[str, Any]) -> bool:
        taints = node["spec"].get("taints") or []
        kept = [taint for taint in taints if taint.get("key") != NOT_READY]
        if len(kept) == len(taints):
            return False
        admin.merge(f"/api/v1/nodes/{node['metadata']['name']}", {"spec": {"taints": kept or None}})
        return True

    nodes = admin.request("GET", "/api/v1/nodes")["items"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        return sum(pool.map(ready, nodes))


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    if selector.get("matchExpressions") or not wanted:
        return False  # the synth PDBs select by matchLabels only
    return all(labels.get(key) == value for key, value in wanted.items())


def fill(admin: Admin, node: str, count: int) -> int:
    """Put copies of `node`'s ReplicaSet pods on it (bound, status Running, as the loader makes them)
    until it holds `count` pods to move (110 is the kubelet's default max pods). The copies made."""
    pods = admin.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={node}")["items"]
    templates = [
        pod
        for pod in pods
        if any(owner.get("kind") == "ReplicaSet" for owner in pod["metadata"].get("ownerReferences", []))
    ]
    movable = sum(
        1
        for pod in pods
        if not any(owner.get("kind") in ("DaemonSet", "Node") for owner in pod["metadata"].get("ownerReferences", []))
    )
    made = 0
    for index in range(max(0, count - movable)):
        template = templates[index % len(templates)]
        meta = template["metadata"]
        copy = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name'][:50]}-copy{index}",
                "namespace": meta["namespace"],
                "labels": meta.get("labels") or {},
                "ownerReferences": meta.get("ownerReferences") or [],
            },
            "spec": template["spec"],
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/pods"
        admin.request("POST", path, copy)
        admin.merge(f"{path}/{copy['metadata']['name']}/status", {"status": template["status"]})
        made += 1
    return made


def prepare(admin: Admin, node: str, now: datetime, *, allowed: int) -> int:
    """Cordon `node` with drain-started-at (a drain under way) and let its pods' PDBs allow `allowed`
    disruptions (a PDB made for each pod no PDB covers when `allowed` is 0). The pods to evict."""
    pods = admin.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={node}")["items"]
    movable = [
        pod
        for pod in pods
        if not any(owner.get("kind") in ("DaemonSet", "Node") for owner in pod["metadata"].get("ownerReferences", []))
    ]
    for pod in movable:
        namespace, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
        pdbs = admin.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")["items"]
        covering = [pdb for pdb in pdbs if _matches(pdb["spec"].get("selector") or {}, labels)]
        if not covering and allowed == 0:
            name = f"hold-{pod['metadata']['name']}"[:63]
            body = {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": labels}},
            }
            covering = [admin.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body)]
        for pdb in covering:
            meta = pdb["metadata"]
            status = {
                "observedGeneration": meta.get("generation", 1),
                "disruptionsAllowed": allowed,
                "currentHealthy": 10,
                "desiredHealthy": 10 - allowed if allowed < 10 else 0,
                "expectedPods": 10,
            }
            path = f"/apis/policy/v1/namespaces/{meta['namespace']}/poddisruptionbudgets/{meta['name']}/status"
            admin.merge(path, {"status": status})
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    admin.merge(
        f"/api/v1/nodes/{node}",
        {"metadata": {"annotations": {DRAIN_STARTED_AT: stamp}}, "spec": {"unschedulable": True}},
    )
    return len(movable)


def remove(admin: Admin, node: str) -> None:
    """The node and its pods deleted, as the Cluster Autoscaler would (no kubelet finishes the evictions)."""
    pods = admin.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={node}")["items"]
    for pod in pods:
        meta = pod["metadata"]
        with contextlib.suppress(RuntimeError):
            admin.request(
                "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", {"gracePeriodSeconds": 0}
            )
    admin.request("DELETE", f"/api/v1/nodes/{node}")


def _cpu(pid: int | None) -> float:
    return live_scale._cpu_seconds(pid) if pid else 0.0


class Collections:
    """kube-apiserver's garbage collector, so that a window's CPU counts what collecting that window's own
    garbage costs, wherever Go runs the collection (it collects once the heap has grown by the live heap,
    GOGC=100: a read that allocates 2.7 GB on a 4 GB live heap may trigger none, or pay for an earlier
    read's). As bench/api_cost.py counts it: the process's CPU, less what Go's collector spent meanwhile
    (`go_cpu_classes_gc_total_cpu_seconds_total`), plus the window's allocations over the live heap times
    one forced full collection's CPU (`/debug/pprof/heap?gc=1`)."""

    def __init__(self, url: str, pid: int) -> None:
        self.metrics = api_cost._go_metrics(url)
        self.collect = collect = api_cost._collector(url)
        before = _cpu(pid)
        collect()
        self.full_collection_cpu = _cpu(pid) - before
        self.live_heap = self.metrics()["heap"]

    def cpu(self, raw: float, before: dict[str, float], after: dict[str, float]) -> float:
        collector = after.get("gc_cpu", 0.0) - before.get("gc_cpu", 0.0)
        allocated = after["allocated"] - before["allocated"]
        return raw - collector + allocated / self.live_heap * self.full_collection_cpu


def measure(
    tree: Path,
    kubeconfig: Path,
    config_path: Path,
    budget: int,
    now: datetime,
    pids: tuple[int, int | None],
    log: Path,
    collections: Collections | None = None,
) -> dict[str, Any]:
    server, etcd = pids
    if collections is not None:  # each window starts on a collected heap: it pays for no earlier garbage
        collections.collect()
    # The median of five windows: a collection or a background task landing in one is not taken for the idle
    # rate (a single 10 s window once read 0.53 CPU-seconds a second where the others read 0.02-0.04).
    rates = api_cost.idle_rates((server,) if etcd is None else (server, etcd), IDLE_SECONDS, IDLE_WINDOWS)
    idle = (rates[0], rates[1] if etcd is not None else 0.0)
    go_before = collections.metrics() if collections is not None else {}
    before = (_cpu(server), _cpu(etcd), time.monotonic())
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with open(log, "wb") as logged:
        answer = subprocess.run(
            [sys.executable, "-c", CHILD, str(kubeconfig), str(config_path), str(budget), now.isoformat()],
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=logged,
            check=True,
        )
    wall = time.monotonic() - before[2]
    result: dict[str, Any] = orjson.loads(answer.stdout.splitlines()[-1])
    result["apiserverCpu"] = round(_cpu(server) - before[0] - idle[0] * wall, 2)
    result["apiserverIdleRate"] = round(idle[0], 4)
    if collections is not None:
        go_after = collections.metrics()
        result["apiserverCpuWithGc"] = round(collections.cpu(result["apiserverCpu"], go_before, go_after), 2)
        result["apiserverAllocatedGB"] = round((go_after["allocated"] - go_before["allocated"]) / 1e9, 2)
    result["etcdCpu"] = round(_cpu(etcd) - before[1] - idle[1] * wall, 2)
    reads = result["reads"]
    result["proofReads"] = {
        "count": len(reads),
        "seconds": round(sum(read["seconds"] for read in reads), 2),
        "bytesOnWire": sum(read["bytesOnWire"] for read in reads),
        "requests": sum(read["requests"] for read in reads),
    }
    # Every byte the run read: its own read, the proofs' reads (a tree before watches, or a watch's fallback)
    # and the watch streams with their resourceVersion reads. One full read of the same cluster is the run's own.
    watch = result.get("watch") or {}
    full = (result.get("read") or {}).get("bytesOnWire") or 0
    result["fullReadBytesOnWire"] = full
    result["runBytesOnWire"] = (
        full
        + result["proofReads"]["bytesOnWire"]
        + (watch.get("bytesOnWire") or 0)
        + (watch.get("freshReadBytesOnWire") or 0)
    )
    result["fullReads"] = round(result["runBytesOnWire"] / full, 3) if full else None
    return result


# A child that reads the cluster once, as a run does, for what one full read costs kube-apiserver.
READ_CHILD = r"""
import sys, urllib3
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
from compactor import service
from compactor.kube.client import Cluster
cluster = Cluster(service.kubernetes_client(sys.argv[1], {}))
cluster.read_snapshot()
print(cluster.last_read.wire_bytes)
"""


def full_read_cost(
    tree: Path, kubeconfig: Path, pids: tuple[int, int | None], idle: float, collections: Collections | None = None
) -> dict[str, Any]:
    """One full read of the cluster with the tree's reader, in a child: kube-apiserver's CPU for it (less
    `idle`, its idle rate measured before the run just made), its bytes on the wire and its wall time."""
    server, _ = pids
    if collections is not None:
        collections.collect()
    go_before = collections.metrics() if collections is not None else {}
    before = (_cpu(server), time.monotonic())
    answer = subprocess.run(
        [sys.executable, "-c", READ_CHILD, str(kubeconfig)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.PIPE,
        check=True,
    )
    wall = time.monotonic() - before[1]
    found: dict[str, Any] = {
        "apiserverCpu": round(_cpu(server) - before[0] - idle * wall, 2),
        "bytesOnWire": int(answer.stdout.split()[-1]),
        "seconds": round(wall, 2),
    }
    if collections is not None:
        go_after = collections.metrics()
        found["apiserverCpuWithGc"] = round(collections.cpu(found["apiserverCpu"], go_before, go_after), 2)
        found["apiserverAllocatedGB"] = round((go_after["allocated"] - go_before["allocated"]) / 1e9, 2)
    return found


@contextlib.contextmanager
def server(nodes: int, attach: str | None) -> Iterator[tuple[str, Path, tuple[int, int | None]]]:
    if attach:
        url, apiserver_pid, *etcd_pid = attach.split(",")
        directory = OUT_DIR / "attached"
        directory.mkdir(parents=True, exist_ok=True)
        kubeconfig = real_apiserver._kubeconfig(directory / "reader.kubeconfig", url, real_apiserver.READER_TOKEN)
        yield url, kubeconfig, (int(apiserver_pid), int(etcd_pid[0]) if etcd_pid else None)
        return
    with real_apiserver.control_plane(cache_check=False) as plane:
        print(f"  loading {nodes:,} nodes ...", file=sys.stderr, flush=True)
        print(f"  {real_apiserver.load_in_child(plane.url, nodes)}", file=sys.stderr, flush=True)
        yield plane.url, plane.reader_kubeconfig, (plane.apiserver_pid, plane.etcd_pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/drain_cost.py", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000, help="the synth cluster's size (what --attach loaded)")
    parser.add_argument("--attach", metavar="URL,APISERVER_PID[,ETCD_PID]")
    parser.add_argument("--trees", default=f"after={REPO}", help="NAME=DIR,... node-compactor trees to compare")
    parser.add_argument("--cases", default="free,held", help="free, held, or free110 (a node filled to 110 pods)")
    parser.add_argument("--budget", type=int, default=240, help="each run's COMPACTOR_RUN_BUDGET_SECONDS")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case and tree, each on a node of its own")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="measure the first run on the cluster too (it marks every underutilized node: thousands of writes)",
    )
    args = parser.parse_args(argv)
    trees = [
        (name, Path(directory).resolve()) for name, _, directory in (t.partition("=") for t in args.trees.split(","))
    ]
    config = synth.config()
    # Objects loaded through the API carry the server's creationTimestamp: at the synth's NOW every node
    # would be younger than minimumNodeAgeSeconds; an hour after now, the scale-up cooldown is past too.
    now = datetime.now(UTC) + timedelta(hours=1)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    config_path = OUT_DIR / "config.json"
    config_path.write_bytes(orjson.dumps(config))
    results = []
    with server(args.nodes, args.attach) as (url, kubeconfig, pids):
        admin = Admin(url)
        print(f"  {untaint(admin)} nodes untainted ({NOT_READY})", file=sys.stderr, flush=True)
        nodes = iter(candidates(kubeconfig, config, now))
        try:
            collections: Collections | None = Collections(url, pids[0])
        except (RuntimeError, KeyError, urllib3.exceptions.HTTPError) as error:
            print(f"  kube-apiserver's collections are not measured: {error}", file=sys.stderr, flush=True)
            collections = None
        runs = [
            (case, name, tree) for case in args.cases.split(",") for _ in range(args.repeat) for name, tree in trees
        ]
        if args.warm_up:
            runs.insert(0, ("free", "warm-up", trees[-1][1]))
        for case, name, tree in runs:  # one pod changes every second, as api_cost measures reads
            node = next(nodes)
            # "free110": a free drain of a node filled up to 110 pods to move.
            kind, wanted = case.rstrip("0123456789"), case[len(case.rstrip("0123456789")) :]
            if wanted:
                fill(admin, node, int(wanted))
            pods = prepare(admin, node, now, allowed=1000 if kind == "free" else 0)
            print(f"  {name} {case}: {node}, {pods} pods to evict", file=sys.stderr, flush=True)
            log = OUT_DIR / f"{name}-{case}.log"
            try:
                with api_cost.churning(url, 1.0):
                    result = measure(tree, kubeconfig, config_path, args.budget, now, pids, log, collections)
                    result["fullRead"] = full_read_cost(
                        tree, kubeconfig, pids, result["apiserverIdleRate"], collections
                    )
            finally:
                remove(admin, node)
            cpu = result["fullRead"]["apiserverCpu"]
            result["fullReadsOfCpu"] = round(result["apiserverCpu"] / cpu, 3) if cpu > 0 else None
            if "apiserverCpuWithGc" in result:
                with_gc = result["fullRead"]["apiserverCpuWithGc"]
                result["fullReadsOfCpuWithGc"] = round(result["apiserverCpuWithGc"] / with_gc, 3)
            result.update(tree=name, case=case, node=node, pods=pods)
            results.append(result)
            print(f"  {orjson.dumps({k: v for k, v in result.items() if k != 'reads'}).decode()}", flush=True)
    (OUT_DIR / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    for line in summary(results):
        print(line, flush=True)
    return 0


RATIOS = ("fullReads", "fullReadsOfCpu", "fullReadsOfCpuWithGc")


def summary(results: list[dict[str, Any]]) -> list[str]:
    """Per case and tree: the median of each ratio to one full read over its runs, with their range."""
    lines = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((result["case"], result["tree"]), []).append(result)
    for (case, tree), group in groups.items():
        if tree == "warm-up":
            continue
        parts = []
        for key in RATIOS:
            values = sorted(v for v in (r.get(key) for r in group) if v is not None)
            if values:
                parts.append(f"{key} {statistics.median(values):.3f} ({values[0]:.3f}-{values[-1]:.3f})")
        lines.append(f"  {case} {tree}, {len(group)} run(s): " + ", ".join(parts))
    return lines


if __name__ == "__main__":
    sys.exit(main())
