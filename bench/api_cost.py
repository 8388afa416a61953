"""What one run costs the API server, each way of reading, beside one `kubectl get pods -A -o json` (issue 27).

    python bench/api_cost.py --server real --sizes 500,5000 [--repeat 3] [--no-pod-status]
    python bench/api_cost.py --server fake --sizes 5000          # the fake API server instead
    python bench/live_scale.py --real ...                       # the same, from the live benchmark

For each size (nodes, 30 pods each, the `bench.synth` cluster) a server is started and
loaded: `--server real` is kube-apiserver with etcd (`bench.real_apiserver`: the e2e
toolchain's v1.36 binaries, objects created through the API); `--server fake` is the fake
API server in a process of its own (`bench.live_scale.serving`). Then `--repeat` rounds,
each measuring, in a fresh child process and one after another:

- `today`: `Cluster.read_snapshot()` as before issue 27, pages of 500 without gzip;
- `paged+gzip`: the default: pages of `compactor.kube.client.PAGE_SIZE` with `Accept-Encoding: gzip`;
- `watch-list`: streaming lists (`COMPACTOR_LIST_METHOD=watch-list`);
- `dry run today` / `dry run`: `python -m compactor run --dry-run --json` end to end, as
  before issue 27 (pages of 500, no gzip: patched in the child) and as it is now;
- `kubectl`: `kubectl get pods -A -o json` (its default: pages of 500, gzip), output discarded;
  only up to KUBECTL_UP_TO nodes, because kubectl holds the whole List (2.6 GiB at 500 nodes);
- `kubectl's requests`: the same requests made by this script (GET /api/v1/pods, limit 500,
  continue, gzip, one connection), each answer read and dropped: kubectl's cost to the server
  at any size (compared with kubectl itself where both run).

Per measurement: requests (the reader's own count; kubectl's from `-v=6`), bytes on the
wire (the answers' bodies as received, compressed when they were; for kubectl not known to
the client, so every row also gives what the API server process wrote: `wchar` of
/proc/PID/io, TLS included), wall time and peak RSS of the child (`wait4`), and the CPU
seconds the API server process (and etcd) used meanwhile, from /proc/PID/stat, less what
it uses idle over the same time (measured before the rounds). Before each measurement the
real kube-apiserver is made to collect its garbage (GET /debug/pprof/heap?gc=1 as the admin,
not measured), so that the Go collector's work for one measurement's garbage is not counted
in the next; the rounds rotate the order of the measurements for the same reason. Medians
over the rounds, min-max beside them. Writes `bench/out/api-cost/api_cost.md` and `results.json`.
A benchmark run by hand, never a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from bench import live_scale, synth  # noqa: E402

OUT_DIR = synth.OUT_DIR / "api-cost"
CHILD_TIMEOUT_SECONDS = 1800.0
IDLE_SECONDS = 30.0
IDLE_WINDOWS = 6
SETTLE_SECONDS = 2.0
SMALL_OUTPUT = 64 * 1024 * 1024  # a child's stdout read back (reports, the children's JSON lines)
VARIANTS = ("today", "paged+gzip", "watch-list", "dry run today", "dry run", "kubectl", "kubectl's requests")
# Before issue 27 the reader listed in pages of 500 without gzip; now in pages of compactor.kube.client.PAGE_SIZE.
TODAY_PAGE_SIZE = 500
READS: dict[str, tuple[str, bool, int | None]] = {
    "today": ("paged-list", False, TODAY_PAGE_SIZE),
    "paged+gzip": ("paged-list", True, None),
    "watch-list": ("watch-list", True, None),
}
# kubectl builds the whole List before printing it: 2.6 GiB of RSS at 500 nodes (measured here), so about
# 26 GiB at 5,000, more than the benchmark machine has. Above this size only its requests are made.
KUBECTL_UP_TO = 1000
KUBECTL_PAGE = 500  # kubectl's --chunk-size default
# The dry run as before issue 27: the same command with the reader's gzip header emptied.
_DRY_RUN_TODAY = (
    "import runpy, sys; import compactor.kube.client as kube; kube.GZIP_HEADERS.clear(); "
    f"kube.Cluster.__init__.__kwdefaults__ = {{'page_size': {TODAY_PAGE_SIZE}}}; "
    "sys.argv = ['compactor', *sys.argv[1:]]; runpy.run_module('compactor', run_name='__main__')"
)


@dataclass(frozen=True)
class Server:
    """A running API server: its process (and etcd's, for the real one) and a kubeconfig to reach it."""

    kind: str
    pid: int
    etcd_pid: int | None
    kubeconfig: Path
    loaded: dict[str, Any]
    # Forces a garbage collection in the server (kube-apiserver's /debug/pprof/heap?gc=1); None for the fake.
    collect: Callable[[], None] | None = None
    # The Go runtime's counters from /metrics (allocated bytes, live heap, collections); None for the fake.
    metrics: Callable[[], dict[str, float]] | None = None
    url: str | None = None  # the real server's, for `churning`


@dataclass(frozen=True)
class Sample:
    wall_seconds: float
    peak_mib: float
    server_cpu: float  # net of idle
    etcd_cpu: float | None
    server_written: int  # wchar of the API server process
    reported: dict[str, Any]
    client_cpu: float = 0.0  # user + system CPU of the child itself


@dataclass
class Measurement:
    nodes: int
    server: Server
    idle_cpu_per_second: float
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    collection: dict[str, float] = field(default_factory=dict)  # `_collection_cost`
    churn: float = 0.0  # seconds between two pod changes while measuring (0: none; `churning`)


def _cpu(pid: int) -> float:
    return live_scale._cpu_seconds(pid)


def _written(pid: int) -> int:
    with open(f"/proc/{pid}/io") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


# -- the children --------------------------------------------------------------------------------------------


def child_read(kubeconfig: str, method: str, gzip: bool, page_size: int | None) -> dict[str, Any]:
    """One `read_snapshot()` the given way; what it read and what the reader counted."""
    import urllib3

    from compactor import service
    from compactor.kube.client import LIST_METHODS, Cluster

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    api_client = service.kubernetes_client(kubeconfig, {})
    cluster = Cluster(api_client) if page_size is None else Cluster(api_client, page_size=page_size)
    cluster.list_method = next(known for known in LIST_METHODS if known == method)
    cluster.gzip = gzip
    started = time.perf_counter()
    snapshot = cluster.read_snapshot()
    seconds = time.perf_counter() - started
    stats = cluster.last_read.to_dict() if cluster.last_read is not None else {}
    return {"seconds": seconds, "nodes": len(snapshot.nodes), "pods": len(snapshot.pods), "read": stats}


def child_kubectl_requests(kubeconfig: str) -> dict[str, Any]:
    """The requests `kubectl get pods -A -o json` makes (GET /api/v1/pods, limit 500, continue, gzip,
    `Accept: application/json`, one kept-alive connection), each answer read and dropped."""
    import urllib3

    config = orjson.loads(Path(kubeconfig).read_bytes())
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"].get("token")
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    http = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_NONE", retries=False)
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip", "User-Agent": "kubectl-requests"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    token_continue = ""
    requests = wire = decoded = 0
    while True:
        fields = {"limit": str(KUBECTL_PAGE), **({"continue": token_continue} if token_continue else {})}
        answer = http.request("GET", f"{server}/api/v1/pods", fields=fields, headers=headers, preload_content=False)
        data = answer.read()
        requests += 1
        wire += answer.tell()
        decoded += len(data)
        if answer.status != 200:
            raise SystemExit(f"HTTP {answer.status}: {data[:300]!r}")
        page = orjson.loads(data)
        token_continue = (page.get("metadata") or {}).get("continue") or ""
        if not token_continue:
            break
    return {"read": {"requests": requests, "bytesOnWire": wire, "bytesDecoded": decoded}}


# -- one measured child --------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = live_scale._clean_env()
    env["PYTHONWARNINGS"] = "ignore::urllib3.exceptions.InsecureRequestWarning"
    return env


def _measure(
    command: list[str], server: Server, idle: float, *, env: dict[str, str] | None = None, name: str
) -> tuple[Sample, bytes, bytes]:
    with open(OUT_DIR / f"{name}.out", "w+b") as stdout, open(OUT_DIR / f"{name}.err", "w+b") as stderr:
        cpu_before, written_before = _cpu(server.pid), _written(server.pid)
        etcd_before = _cpu(server.etcd_pid) if server.etcd_pid else None
        started = time.perf_counter()
        # A forked child, not a vforked one: Linux starts a child's peak RSS (ru_maxrss) at exec from the
        # peak of the memory it replaces, which after vfork is this process's high-water mark, after fork
        # only what this process holds now (tens of MiB).
        process = subprocess.Popen(
            command, cwd=REPO, env=env or _env(), stdout=stdout, stderr=stderr, preexec_fn=_forked
        )
        watchdog = threading.Timer(CHILD_TIMEOUT_SECONDS, process.kill)
        watchdog.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - started
        server_cpu = _cpu(server.pid) - cpu_before - idle * wall
        etcd_cpu = _cpu(server.etcd_pid) - etcd_before if server.etcd_pid and etcd_before is not None else None
        written = _written(server.pid) - written_before
        stdout.seek(0)
        stderr.seek(0)
        # kubectl's List (100 MB at 500 nodes) is counted, never read in: this process must stay small.
        size = os.fstat(stdout.fileno()).st_size
        out = stdout.read() if size < SMALL_OUTPUT else b""
        err = stderr.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited {code}:\n{err.decode(errors='replace')[-3000:]}")
    client_cpu = usage.ru_utime + usage.ru_stime
    sample = Sample(wall, usage.ru_maxrss / 1024, server_cpu, etcd_cpu, written, {"outputBytes": size}, client_cpu)
    return sample, out, err


def measure_variant(variant: str, server: Server, idle: float, config_path: Path) -> Sample:
    if variant in READS:
        method, gzip, page_size = READS[variant]
        command = [sys.executable, str(Path(__file__).resolve()), "--child-read", str(server.kubeconfig), method]
        command += ["--gzip" if gzip else "--no-gzip", *(["--page-size", str(page_size)] if page_size else [])]
        sample, out, _ = _measure(command, server, idle, name=f"child-{method}-{gzip}")
        reported = orjson.loads(out.splitlines()[-1])
    elif variant in ("dry run", "dry run today"):
        arguments = ["run", "--kubeconfig", str(server.kubeconfig), "--dry-run", "--json"]
        start = (
            [sys.executable, "-c", _DRY_RUN_TODAY]
            if variant == "dry run today"
            else [sys.executable, "-m", "compactor"]
        )
        env = {**_env(), "COMPACTOR_CONFIG": config_path.read_text()}
        sample, out, _ = _measure([*start, *arguments], server, idle, env=env, name="dry-run")
        report = orjson.loads(out)
        reported = {"read": report.get("read", {}), "action": report["decision"]["action"]}
    elif variant == "kubectl's requests":
        command = [sys.executable, str(Path(__file__).resolve()), "--child-kubectl-requests", str(server.kubeconfig)]
        sample, out, _ = _measure(command, server, idle, name="kubectl-requests")
        reported = orjson.loads(out.splitlines()[-1])
    else:
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise SystemExit("kubectl is not on PATH")
        command = [kubectl, "--kubeconfig", str(server.kubeconfig), "get", "pods", "-A", "-o", "json", "-v=6"]
        sample, out, err = _measure(command, server, idle, name="kubectl")
        requests = sum(1 for line in err.splitlines() if b"GET https://" in line or b"GET http://" in line)
        reported = {
            "read": {"requests": requests, "bytesDecoded": sample.reported["outputBytes"]},
            "version": _kubectl_version(kubectl),
        }
    return Sample(
        sample.wall_seconds,
        sample.peak_mib,
        sample.server_cpu,
        sample.etcd_cpu,
        sample.server_written,
        reported,
        sample.client_cpu,
    )


def _forked() -> None:
    """Run in the child between fork and exec; its being set makes subprocess fork instead of vfork."""


def _kubectl_version(kubectl: str) -> str:
    answer = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, check=False)
    with contextlib.suppress(orjson.JSONDecodeError, KeyError):
        return str(orjson.loads(answer.stdout)["clientVersion"]["gitVersion"])
    return "unknown"


def _settle(server: Server) -> None:
    """Collect the server's garbage before a measurement: what the one before left must not be
    collected (and its CPU counted) during this one. The collection and a moment after it are not measured."""
    if server.collect is not None:
        server.collect()
        time.sleep(SETTLE_SECONDS)


def _collection_cost(server: Server) -> dict[str, float]:
    """What one forced collection of the server's whole heap costs it, and the live heap it leaves."""
    if server.collect is None or server.metrics is None:
        return {}
    before = _cpu(server.pid)
    server.collect()
    cpu = _cpu(server.pid) - before
    return {"cpu": cpu, "heap": server.metrics()["heap"]}


def _idle_rate(server: Server) -> float:
    """The server's CPU per second while nobody reads: the median of IDLE_WINDOWS windows, so that a
    background task landing in one (kube-apiserver compares its watch cache with etcd every 5 to 7.5
    minutes, listing every pod from etcd: DetectCacheInconsistency) does not count as idle."""
    (rate,) = idle_rates((server.pid,), IDLE_SECONDS, IDLE_WINDOWS)
    return rate


def idle_rates(pids: Sequence[int], seconds: float, windows: int) -> tuple[float, ...]:
    """Each process's CPU per second over `seconds`, the median of `windows` windows of it each."""
    rates: list[list[float]] = [[] for _ in pids]
    for _ in range(windows):
        before, started = [_cpu(pid) for pid in pids], time.perf_counter()
        time.sleep(seconds / windows)
        elapsed = time.perf_counter() - started
        for pid, cpu, found in zip(pids, before, rates, strict=True):
            found.append((_cpu(pid) - cpu) / elapsed)
    return tuple(statistics.median(found) for found in rates)


# -- the servers ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def real_server(nodes: int, pod_status: bool) -> Iterator[Server]:
    from bench import real_apiserver

    with real_apiserver.control_plane(OUT_DIR / f"apiserver-{nodes}") as plane:
        _say(f"  kube-apiserver pid {plane.apiserver_pid}; loading {nodes:,} nodes ...")
        loaded = real_apiserver.load_in_child(plane.url, nodes, pod_status=pod_status)
        _say(f"  loaded {loaded}")
        yield Server(
            "real",
            plane.apiserver_pid,
            plane.etcd_pid,
            plane.reader_kubeconfig,
            loaded,
            _collector(plane.url),
            _go_metrics(plane.url),
            plane.url,
        )


@contextlib.contextmanager
def attached_server(nodes: int, attach: str) -> Iterator[Server]:
    """A kube-apiserver this script started and loaded before (`URL,APISERVER_PID,ETCD_PID`), measured again
    as it is: a 150,000-pod load takes half an hour. Left running; stop it by its pids."""
    url, apiserver_pid, etcd_pid = attach.split(",")
    kubeconfig = OUT_DIR / f"apiserver-{nodes}" / "reader.kubeconfig"
    yield Server(
        "real", int(apiserver_pid), int(etcd_pid), kubeconfig, {"attached": url}, _collector(url), _go_metrics(url), url
    )


GO_METRICS = {
    "go_memstats_alloc_bytes_total": "allocated",
    "go_memstats_heap_alloc_bytes": "heap",
    "go_gc_duration_seconds_count": "collections",
    # The Go runtime's estimate of the CPU its collector used (runtime/metrics /cpu/classes/gc/total).
    "go_cpu_classes_gc_total_cpu_seconds_total": "gc_cpu",
}


def _go_metrics(url: str) -> Callable[[], dict[str, float]]:
    from bench import real_apiserver

    http = real_apiserver._http(1)

    def read() -> dict[str, float]:
        headers = real_apiserver._auth(real_apiserver.ADMIN_TOKEN)
        text = http.request("GET", f"{url}/metrics", headers=headers, timeout=60.0).data.decode()
        found = {}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in GO_METRICS:
                found[GO_METRICS[name]] = float(value)
        return found

    return read


@contextlib.contextmanager
def churning(url: str, every: float) -> Iterator[None]:
    """One pod's annotation patched every `every` seconds, as the admin, while measuring.

    A real cluster's pods change all the time; kube-apiserver (1.34+, ListFromCacheSnapshot) keeps
    a snapshot of its watch cache at each change and serves a list's continue pages from the one
    at the list's resourceVersion. In a loaded cluster whose pods never change, the apiserver's
    etcd compaction (every 5 minutes) removes the last pod snapshot, and every continue page is
    read from etcd instead, as before 1.34 (`apiserver_storage_list_total` counts them).
    """
    from bench import real_apiserver

    http = real_apiserver._http(1)
    headers = real_apiserver._auth(real_apiserver.ADMIN_TOKEN)
    page = orjson.loads(http.request("GET", f"{url}/api/v1/pods?limit=50", headers=headers).data)
    pods = [(item["metadata"]["namespace"], item["metadata"]["name"]) for item in page["items"]]
    stop = threading.Event()

    def churn() -> None:
        count = 0
        while not stop.wait(every):
            namespace, name = pods[count % len(pods)]
            body = {"metadata": {"annotations": {"bench.node-compactor.dev/churn": str(count)}}}
            path = f"{url}/api/v1/namespaces/{namespace}/pods/{name}"
            patch = {**headers, "Content-Type": "application/merge-patch+json"}
            http.request("PATCH", path, body=orjson.dumps(body), headers=patch, timeout=30.0)
            count += 1

    thread = threading.Thread(target=churn, name="churn", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)


def _collector(url: str) -> Callable[[], None]:
    from bench import real_apiserver

    http = real_apiserver._http(1)

    def collect() -> None:
        headers = real_apiserver._auth(real_apiserver.ADMIN_TOKEN)
        answer = http.request("GET", f"{url}/debug/pprof/heap?gc=1", headers=headers, timeout=600.0)
        if answer.status != 200:
            raise RuntimeError(f"cannot force a collection in kube-apiserver: HTTP {answer.status}")

    return collect


@contextlib.contextmanager
def fake_server(nodes: int) -> Iterator[Server]:
    scale = synth.Scale(nodes, nodes * live_scale.PODS_PER_NODE)
    files, _ = live_scale._ensure_data(scale)
    kubeconfig = OUT_DIR / f"fake-{nodes}.kubeconfig"
    with live_scale.serving(files.snapshot, kubeconfig, OUT_DIR / f"fake-{nodes}.log") as served:
        yield Server("fake", served.pid, None, kubeconfig, {"seconds": served.ready_seconds})


def measure(
    kind: str, nodes: int, repeat: int, pod_status: bool, attach: str | None = None, churn: float = 0.0
) -> Measurement:
    config_path = OUT_DIR / "config.json"
    config_path.write_bytes(orjson.dumps(synth.config()))
    if attach:
        opened = attached_server(nodes, attach)
    else:
        opened = real_server(nodes, pod_status) if kind == "real" else fake_server(nodes)
    with opened as server:
        measure_variant("today", server, 0.0, config_path)  # warm-up, untimed: caches, connections
        changing = churning(server.url, churn) if server.url and churn > 0 else contextlib.nullcontext()
        with changing:
            _settle(server)
            idle = _idle_rate(server)  # with the churn: it runs through every measurement too
            _say(f"  idle API server CPU: {idle:.3f} s/s")
            collection = _collection_cost(server)
            if collection:
                heap = collection["heap"] / 2**30
                _say(f"  a full collection: {collection['cpu']:.2f} s of CPU, live heap {heap:.2f} GiB")
            variants = [v for v in VARIANTS if v != "kubectl" or nodes <= KUBECTL_UP_TO]
            measurement = Measurement(nodes, server, idle, {variant: [] for variant in variants}, collection)
            measurement.churn = churn if server.url else 0.0
            _rounds(measurement, server, variants, repeat, idle, config_path)
    return measurement


def _rounds(
    measurement: Measurement, server: Server, variants: list[str], repeat: int, idle: float, config_path: Path
) -> None:
    """`repeat` rounds of every variant, the server's garbage collected before each."""
    for round_number in range(1, repeat + 1):
        # Each round starts one later in the list, so no variant always follows the same one.
        shift = (round_number - 1) % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            _settle(server)
            before = server.metrics() if server.metrics else {}
            sample = measure_variant(variant, server, idle, config_path)
            if server.metrics:
                after = server.metrics()
                sample.reported["allocatedBytes"] = after["allocated"] - before["allocated"]
                sample.reported["collections"] = after["collections"] - before["collections"]
                sample.reported["gcCpuSeconds"] = after["gc_cpu"] - before["gc_cpu"]
            measurement.samples[variant].append(sample)
            _say(
                f"  round {round_number} {variant}: {sample.wall_seconds:.2f} s, {sample.peak_mib:,.0f} MiB, "
                f"server CPU {sample.server_cpu:.2f} s (collector {sample.reported.get('gcCpuSeconds', 0):.2f}), "
                f"allocated {sample.reported.get('allocatedBytes', 0) / 1e9:.2f} GB, "
                f"wrote {sample.server_written / 1e6:,.1f} MB, client CPU {sample.client_cpu:.2f} s"
            )


# -- the report ----------------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _spread(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    return f"{_median(values):,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def table(measurements: list[Measurement]) -> str:
    lines = [
        "| size | read | requests | bytes on the wire MB | server wrote MB | wall s | peak MiB | client CPU s "
        "| API server CPU s (requests) | server allocated GB | + their collection, est. s | etcd CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in measurements:
        size = f"{m.nodes:,} nodes / {m.samples['today'][0].reported.get('pods', 0):,} pods"
        for index, variant in enumerate(m.samples):
            samples = m.samples[variant]
            reads = [s.reported.get("read", {}) for s in samples]
            wire = [r["bytesOnWire"] / 1e6 for r in reads if "bytesOnWire" in r]
            etcd = [s.etcd_cpu for s in samples if s.etcd_cpu is not None]
            allocated = [s.reported["allocatedBytes"] / 1e9 for s in samples if "allocatedBytes" in s.reported]
            gc = [_collection_share(m, s) for s in samples if "allocatedBytes" in s.reported]
            work = [_work(m, s) for s in samples]
            lines.append(
                f"| {size if index == 0 else ''} | {variant} | {_median([r.get('requests', 0) for r in reads]):,.0f} "
                f"| {_spread(wire, 1) if wire else 'n/a'} | {_spread([s.server_written / 1e6 for s in samples], 1)} "
                f"| {_spread([s.wall_seconds for s in samples])} | {_spread([s.peak_mib for s in samples], 0)} "
                f"| {_spread([s.client_cpu for s in samples])} | {_spread(work)} "
                f"| {_spread(allocated, 2) if allocated else '-'} | {_spread(gc) if gc else '-'} "
                f"| {_spread(etcd) if etcd else '-'} |"
            )
    return "\n".join(lines)


def _work(m: Measurement, sample: Sample) -> float:
    """The API server's CPU for the requests themselves: its process's, less idle, less a full collection's
    cost for each collection that ran meanwhile (when one runs is Go's choice, once the heap has grown by
    the live heap; what a measurement's own garbage costs is `_collection_share`). Go's own estimate of
    its collector's CPU (go_cpu_classes_gc_total) counts wall time on its processors, which exceeds the
    CPU it got on a machine this busy, so it is recorded (`gcCpuSeconds`) but not used."""
    cycles = float(sample.reported.get("collections", 0.0))
    return sample.server_cpu - cycles * m.collection.get("cpu", 0.0)


def _collection_share(m: Measurement, sample: Sample) -> float:
    """The collector's work a measurement's garbage costs the server, estimated: with GOGC=100 Go collects
    once the heap has grown by the live heap, so each byte allocated costs a full collection / live heap."""
    if not m.collection:
        return 0.0
    return float(sample.reported["allocatedBytes"] / m.collection["heap"] * m.collection["cpu"])


def verdicts(m: Measurement) -> list[str]:
    def median_of(variant: str, pick: Any) -> float:
        return _median([pick(s) for s in m.samples[variant]])

    def with_collection(sample: Sample) -> float:
        return _work(m, sample) + (_collection_share(m, sample) if "allocatedBytes" in sample.reported else 0.0)

    today_wire = median_of("today", lambda s: s.reported["read"]["bytesOnWire"])
    default_wire = median_of("paged+gzip", lambda s: s.reported["read"]["bytesOnWire"])
    kubectl = "kubectl" if "kubectl" in m.samples else "kubectl's requests"
    kubectl_cpu = median_of(kubectl, lambda s: _work(m, s))
    kubectl_total = median_of(kubectl, with_collection)
    dry_run, dry_run_today = (median_of(v, lambda s: s.wall_seconds) for v in ("dry run", "dry run today"))
    lines = [
        f"bytes on the wire, default / today: {default_wire / today_wire:.3f} (target <= 0.25)",
        f"server CPU, dry run / {kubectl}: {median_of('dry run', lambda s: _work(m, s)) / kubectl_cpu:.2f}, "
        f"with the collection of their garbage {median_of('dry run', with_collection) / kubectl_total:.2f} "
        "(target <= 1)",
        f"dry run wall: {dry_run:.2f} s, today's {dry_run_today:.2f} s; peak "
        f"{median_of('dry run', lambda s: s.peak_mib):,.0f} MiB (target <= 512)",
    ]
    for variant in ("today", "paged+gzip", "watch-list", "dry run today"):
        ratio = median_of(variant, lambda s: _work(m, s)) / kubectl_cpu
        total = median_of(variant, with_collection) / kubectl_total
        lines.append(f"server CPU, {variant} / {kubectl}: {ratio:.2f}, with the collection {total:.2f}")
    return lines


def render(measurements: list[Measurement], kind: str) -> str:
    info = live_scale.machine()
    text = [f"## What a run costs the API server ({kind})", ""]
    text += [f"- {key}: {value}" for key, value in info.items()]
    text += [f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", ""]
    text += [table(measurements), ""]
    for m in measurements:
        text += [f"At {m.nodes:,} nodes (idle API server CPU {m.idle_cpu_per_second:.3f} s/s, subtracted):", ""]
        text += [f"- one pod changed every {m.churn:g} s while measuring" if m.churn else "- no pod changed meanwhile"]
        text += [f"- {line}" for line in verdicts(m)]
        text += [f"- a full collection of the server's heap: {m.collection}" if m.collection else "- no collection"]
        text += [f"- loaded: {m.server.loaded}", ""]
    return "\n".join(text) + "\n"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/api_cost.py", description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("real", "fake"), default="real")
    parser.add_argument("--sizes", type=live_scale._sizes, default=[500, 5000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pod-status", action="store_true", help="real server: leave pods Pending (faster load)")
    parser.add_argument(
        "--churn", type=float, default=1.0, help="real server: change one pod every this many seconds (0: never)"
    )
    parser.add_argument("--render", type=Path, metavar="RESULTS", help="render a results.json written before")
    parser.add_argument("--idle", type=float, help="with --render: the idle CPU rate (s/s) to subtract instead")
    parser.add_argument("--attach", metavar="URL,APISERVER_PID,ETCD_PID", help="measure a server loaded before")
    parser.add_argument("--child-read", nargs=2, metavar=("KUBECONFIG", "METHOD"), help=argparse.SUPPRESS)
    parser.add_argument("--child-kubectl-requests", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=True, help=argparse.SUPPRESS)
    parser.add_argument("--page-size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render:
        measurements = _from_json(args.render.read_bytes())
        if args.idle is not None:
            measurements = [_with_idle(m, args.idle) for m in measurements]
        sys.stdout.write(render(measurements, args.server))
        return 0
    if args.child_kubectl_requests:
        sys.stdout.buffer.write(orjson.dumps(child_kubectl_requests(args.child_kubectl_requests)) + b"\n")
        return 0
    if args.child_read:
        result = child_read(args.child_read[0], args.child_read[1], args.gzip, args.page_size)
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    measurements = []
    for nodes in args.sizes:
        _say(f"{nodes:,} nodes on the {args.server} API server ...")
        measurements.append(measure(args.server, nodes, args.repeat, not args.no_pod_status, args.attach, args.churn))
        (OUT_DIR / "results.json").write_bytes(_as_json(measurements))
    text = render(measurements, args.server)
    (OUT_DIR / "api_cost.md").write_text(text)
    sys.stdout.write(text)
    return 0


def _as_json(measurements: list[Measurement]) -> bytes:
    return orjson.dumps(
        [
            {
                "nodes": m.nodes,
                "server": {"kind": m.server.kind, "loaded": m.server.loaded},
                "idle_cpu_per_second": m.idle_cpu_per_second,
                "collection": m.collection,
                "churn": m.churn,
                "samples": {
                    variant: [
                        {
                            "wall_seconds": s.wall_seconds,
                            "peak_mib": s.peak_mib,
                            "server_cpu": s.server_cpu,
                            "etcd_cpu": s.etcd_cpu,
                            "server_written": s.server_written,
                            "client_cpu": s.client_cpu,
                            "reported": s.reported,
                        }
                        for s in samples
                    ]
                    for variant, samples in m.samples.items()
                },
            }
            for m in measurements
        ],
        option=orjson.OPT_INDENT_2,
    )


def _with_idle(m: Measurement, idle: float) -> Measurement:
    """The measurement with another idle rate subtracted (one measured again, over more windows)."""
    samples = {
        variant: [
            dataclasses.replace(s, server_cpu=s.server_cpu + (m.idle_cpu_per_second - idle) * s.wall_seconds)
            for s in listed
        ]
        for variant, listed in m.samples.items()
    }
    return dataclasses.replace(m, idle_cpu_per_second=idle, samples=samples)


def _from_json(data: bytes) -> list[Measurement]:
    """What `_as_json` wrote, to render it again (`--render`)."""
    found = []
    for size in orjson.loads(data):
        server = Server(size["server"]["kind"], 0, None, Path(), size["server"]["loaded"])
        samples = {
            variant: [
                Sample(
                    s["wall_seconds"],
                    s["peak_mib"],
                    s["server_cpu"],
                    s["etcd_cpu"],
                    s["server_written"],
                    s["reported"],
                    s.get("client_cpu", 0.0),
                )
                for s in listed
            ]
            for variant, listed in size["samples"].items()
        }
        found.append(
            Measurement(
                size["nodes"],
                server,
                size["idle_cpu_per_second"],
                samples,
                size.get("collection") or {},
                size.get("churn", 0.0),
            )
        )
    return found


if __name__ == "__main__":
    sys.exit(main())
