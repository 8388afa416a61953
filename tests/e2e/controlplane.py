"""A real Kubernetes control plane on 127.0.0.1 for the e2e tests, from the binaries build.sh caches.

etcd, kube-apiserver (audit log, static tokens, RBAC), kube-controller-manager (only the
controllers listed in CONTROLLERS), kube-scheduler and kwok (nodes marked with the kwok
annotation become Ready, their pods run) are started in a temporary directory, each on a free
port, and stopped again by pid: terminate, wait, kill.

What it must never do: listen beyond 127.0.0.1, leave a process it started running, read or
write ~/.kube, or download anything (build.sh builds the binaries; a missing one is an error
that names build.sh).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLCHAIN = Path(__file__).parent / "toolchain"
BUILD_SCRIPT = "tests/e2e/toolchain/build.sh"
KWOK_STAGES = Path(__file__).parent / "kwok-stages.yaml"
CACHE_ENV = "NODE_COMPACTOR_E2E_CACHE"

# The identity node-compactor runs as: a GKE Google service account is a User named by its email,
# bound by deploy/rbac.yaml and deploy/rbac-hpa-floor.yaml (the placeholder replaced with it).
COMPACTOR_USER = "node-compactor@e2e-project.iam.gserviceaccount.com"
RBAC_PLACEHOLDER = "FUNCTION_SERVICE_ACCOUNT_EMAIL"
ADMIN_USER = "e2e-admin"

# What the tests need of kube-controller-manager, and no more (each one costs CPU on a small machine).
CONTROLLERS = (
    "serviceaccount-controller",  # the default ServiceAccount, without which pods are refused
    "namespace-controller",  # namespaces the tests delete
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "disruption-controller",  # PDB status: disruptionsAllowed, currentHealthy, desiredHealthy
    "garbage-collector-controller",  # a deleted Deployment takes its ReplicaSets and pods with it
    "node-lifecycle-controller",  # Ready/not-ready taints, the cordon taint
    "pod-garbage-collector-controller",  # pods of a deleted node (what follows the Cluster Autoscaler)
    "horizontal-pod-autoscaler-controller",  # scales a Deployment up to a raised minReplicas
    "job-controller",  # a Job's pods, and its completion once they succeed (jobPods "wait")
)

# kwok takes only nodes carrying this annotation (kwok's own convention), so a test can also create
# nodes no one runs.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"

PR_SET_PDEATHSIG = 1


class ControlPlaneError(Exception):
    """The control plane could not be built, started or reached; the message says what to do."""


# -- the binaries ---------------------------------------------------------------------------


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env.get(CACHE_ENV) or Path.home() / ".cache" / "node-compactor-e2e")


def pinned_versions() -> dict[str, str]:
    """KUBERNETES_VERSION, ETCD_VERSION, KWOK_VERSION from versions.env (build.sh's pins)."""
    versions: dict[str, str] = {}
    for line in (TOOLCHAIN / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


def component_versions() -> dict[str, str]:
    """Each component this module starts, with the version build.sh pins for it."""
    pins = pinned_versions()
    kubernetes = pins["KUBERNETES_VERSION"]
    return {
        "etcd": pins["ETCD_VERSION"],
        "kube-apiserver": kubernetes,
        "kube-controller-manager": kubernetes,
        "kube-scheduler": kubernetes,
        "kwok": pins["KWOK_VERSION"],
    }


def binary_path(component: str, version: str, env: Mapping[str, str] = os.environ) -> Path:
    """Where build.sh puts a component: <cache>/<component>-<version>/<component>."""
    return cache_dir(env) / f"{component}-{version}" / component


def binaries() -> dict[str, Path]:
    return {name: binary_path(name, version) for name, version in component_versions().items()}


def missing_binaries() -> list[Path]:
    return [path for path in binaries().values() if not os.access(path, os.X_OK)]


def reported_version(path: Path) -> str:
    """The first line of `<binary> --version` (what the header shows)."""
    done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else f"exit {done.returncode}, no output"


def header_lines() -> list[str]:
    """pytest's header: where the binaries are and what each says its version is."""
    missing = missing_binaries()
    if missing:
        return [f"e2e control plane: {missing_message(missing)}"]
    versions = ", ".join(f"{name} {reported_version(path)!r}" for name, path in binaries().items())
    return [f"e2e control plane ({cache_dir()}): {versions}"]


def missing_message(missing: Sequence[Path]) -> str:
    names = ", ".join(str(path) for path in missing)
    return (
        f"the e2e control plane is not built (missing: {names}); run `bash {BUILD_SCRIPT}` first "
        f"(about 10 minutes the first time, then it is reused from {cache_dir()})"
    )


# -- processes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # If pytest itself is killed (no teardown), the kernel ends the child too.
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate by pid, wait, then kill."""
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=timeout)


# -- certificates, tokens, kubeconfigs ------------------------------------------------------


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def make_pki(directory: Path) -> dict[str, Path]:
    """A CA, a serving certificate for 127.0.0.1/localhost, and the service-account signing key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = directory / "ca.key", directory / "ca.crt"
    key, csr, crt = directory / "apiserver.key", directory / "apiserver.csr", directory / "apiserver.crt"
    ext = directory / "apiserver.ext"
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _openssl("genrsa", "-out", str(ca_key), "2048")
    _openssl("req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=e2e-ca", "-days", "2", "-out", str(ca_crt))
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", "/CN=kube-apiserver", "-out", str(csr))
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
    )
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(crt),
    )  # fmt: skip
    _openssl("genrsa", "-out", str(sa_key), "2048")
    _openssl("rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    return {"ca": ca_crt, "cert": crt, "key": key, "sa_key": sa_key, "sa_pub": sa_pub}


def write_kubeconfig(path: Path, *, server: str, ca: Path, token: str, user: str) -> Path:
    """A kubeconfig with one cluster, one token user and one context (JSON is YAML)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config, indent=2))
    return path


# Every request at Metadata level (who, what, when, answer code); node-compactor's own writes at
# Request level too, so a test can read what it sent (a resourceVersion precondition, a patch).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "users": [COMPACTOR_USER],
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        },
        {"level": "Metadata"},
    ],
}


# -- the control plane ----------------------------------------------------------------------


@dataclass
class ControlPlane:
    """One cluster in `workdir`. `start()` brings it up; `stop()` ends every process it started."""

    workdir: Path
    binaries: Mapping[str, Path]
    processes: list[Process] = field(default_factory=list)
    url: str = ""
    etcd_url: str = ""
    ca_path: Path = Path()
    admin_kubeconfig: Path = Path()
    compactor_kubeconfig: Path = Path()
    audit_log: Path = Path()
    admin_token: str = ""
    compactor_token: str = ""
    versions: dict[str, str] = field(default_factory=dict)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.versions = {name: reported_version(path) for name, path in self.binaries.items()}
        pki = make_pki(self.workdir / "pki")
        self.ca_path = pki["ca"]
        self.admin_token = secrets.token_hex(16)
        self.compactor_token = secrets.token_hex(16)
        controller_token, scheduler_token, kwok_token = (secrets.token_hex(16) for _ in range(3))
        tokens = self.workdir / "tokens.csv"
        # token,user,uid,"groups". The control plane's own components are cluster admins here: the
        # tests are about node-compactor's permissions, not theirs.
        tokens.write_text(
            f'{self.admin_token},{ADMIN_USER},e2e-admin,"system:masters"\n'
            f"{self.compactor_token},{COMPACTOR_USER},node-compactor\n"
            f'{controller_token},system:kube-controller-manager,kcm,"system:masters"\n'
            f'{scheduler_token},system:kube-scheduler,scheduler,"system:masters"\n'
            f'{kwok_token},kwok-controller,kwok,"system:masters"\n'
        )
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        self.audit_log = self.workdir / "audit.log"

        etcd_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.start_process(
            "etcd",
            [
                str(self.binaries["etcd"]),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # a throwaway test store: durability only costs time
                "--log-level=warn",
            ],
        )
        wait_until(
            "etcd is healthy", lambda: _http_ok(f"{self.etcd_url}/health"), timeout=30, process=self.processes[-1]
        )

        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        self.start_process(
            "kube-apiserver",
            [
                str(self.binaries["kube-apiserver"]),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={pki['cert']}",
                f"--tls-private-key-file={pki['key']}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={pki['sa_pub']}",
                f"--service-account-signing-key-file={pki['sa_key']}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",  # each event is written before the request ends
                "--profiling=false",
                "--v=1",
            ],
        )
        self.admin_kubeconfig = write_kubeconfig(
            self.workdir / "admin.kubeconfig", server=self.url, ca=self.ca_path, token=self.admin_token, user=ADMIN_USER
        )
        self.compactor_kubeconfig = write_kubeconfig(
            self.workdir / "node-compactor.kubeconfig",
            server=self.url,
            ca=self.ca_path,
            token=self.compactor_token,
            user=COMPACTOR_USER,
        )
        wait_until("kube-apiserver is ready", self._apiserver_ready, timeout=90, process=self.processes[-1])

        controller_kubeconfig = write_kubeconfig(
            self.workdir / "controller-manager.kubeconfig",
            server=self.url,
            ca=self.ca_path,
            token=controller_token,
            user="system:kube-controller-manager",
        )
        port = free_port()
        self.start_process(
            "kube-controller-manager",
            [
                str(self.binaries["kube-controller-manager"]),
                f"--kubeconfig={controller_kubeconfig}",
                f"--authentication-kubeconfig={controller_kubeconfig}",
                f"--authorization-kubeconfig={controller_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'controller-manager-certs'}",
                "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={pki['sa_key']}",
                f"--root-ca-file={self.ca_path}",
                "--horizontal-pod-autoscaler-sync-period=2s",
                "--profiling=false",
                "--v=1",
            ],
        )
        wait_until(
            "kube-controller-manager is healthy",
            lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", insecure=True),
            timeout=60,
            process=self.processes[-1],
        )

        scheduler_kubeconfig = write_kubeconfig(
            self.workdir / "scheduler.kubeconfig",
            server=self.url,
            ca=self.ca_path,
            token=scheduler_token,
            user="system:kube-scheduler",
        )
        port = free_port()
        self.start_process(
            "kube-scheduler",
            [
                str(self.binaries["kube-scheduler"]),
                f"--kubeconfig={scheduler_kubeconfig}",
                f"--authentication-kubeconfig={scheduler_kubeconfig}",
                f"--authorization-kubeconfig={scheduler_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--profiling=false",
                "--v=1",
            ],
        )
        wait_until(
            "kube-scheduler is ready",
            lambda: _http_ok(f"https://127.0.0.1:{port}/readyz", insecure=True),
            timeout=60,
            process=self.processes[-1],
        )

        kwok_kubeconfig = write_kubeconfig(
            self.workdir / "kwok.kubeconfig", server=self.url, ca=self.ca_path, token=kwok_token, user="kwok-controller"
        )
        port = free_port()
        self.start_process(
            "kwok",
            [
                str(self.binaries["kwok"]),
                f"--kubeconfig={kwok_kubeconfig}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{port}",
                "--node-lease-duration-seconds=40",
                "--cidr=10.0.0.0/16",
            ],
            # kwok reads ~/.kwok/kwok.yaml unless told otherwise; keep it in the work directory.
            env={"HOME": str(self.workdir)},
        )
        wait_until(
            "kwok is healthy",
            lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"),
            timeout=30,
            process=self.processes[-1],
        )

    def stop(self) -> None:
        """End every process this control plane started, newest first (kwok before its API server)."""
        errors: list[str] = []
        for process in reversed(self.processes):
            try:
                process.stop()
            except Exception as error:  # every process must get its turn
                errors.append(f"{process.name} (pid {process.pid}): {error}")
        self.processes.clear()
        if errors:
            raise ControlPlaneError("could not stop: " + "; ".join(errors))

    def start_process(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Process:
        """Start a process that `stop()` ends (by pid); its output goes to <workdir>/<name>.log.

        For components other tests add (the Cluster Autoscaler): give it a kubeconfig from
        `write_kubeconfig(..., token=self.admin_token, ...)` or its own, and a free port from `free_port()`.
        """
        log_path = self.workdir / f"{name}.log"
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env={**os.environ, **(env or {})},
                preexec_fn=_die_with_parent,
            )
        process = Process(name, popen, log_path)
        self.processes.append(process)
        return process

    # -- access ---------------------------------------------------------------------------------

    def _apiserver_ready(self) -> bool:
        return _http_ok(f"{self.url}/readyz", ca=self.ca_path, token=self.admin_token)

    def request(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, content_type: str | None = None
    ) -> tuple[int, Any]:
        """One HTTPS request as the admin (or `token`); the status and the decoded JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.admin_token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        context = ssl.create_default_context(cafile=str(self.ca_path))
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                return answer.status, _json_or_text(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, _json_or_text(error.read())

    # -- etcd -----------------------------------------------------------------------------------

    def etcd(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """etcd's JSON gateway (`/v3/kv/range`, `/v3/kv/txn`, `/v3/kv/compaction`, ...)."""
        request = urllib.request.Request(
            f"{self.etcd_url}/v3/{method}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            found: dict[str, Any] = json.loads(answer.read())
            return found

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, the way kube-apiserver's own compactor does.

        kube-apiserver records each compaction in the key `compact_rev_key` (compare-and-swap on its
        version, then Compact; k8s.io/apiserver/pkg/storage/etcd3/compact.go) and its watch cache
        learns of it from that key (within 15 s), so a list continued from the cache expires too.
        Returns the revision compacted.
        """
        key = base64.b64encode(b"compact_rev_key").decode()
        # A write outside kube-apiserver's keys first: etcd keeps the revision it compacts to, so a list
        # read at the current revision would not expire. Everything before this write goes.
        tick = {"key": base64.b64encode(b"/e2e/compaction-tick").decode(), "value": base64.b64encode(b"1").decode()}
        revision = int(self.etcd("kv/put", tick)["header"]["revision"])
        found = self.etcd("kv/range", {"key": key})
        kvs = found.get("kvs") or []
        version = int(kvs[0].get("version", 0)) if kvs else 0
        value = base64.b64encode(str(revision).encode()).decode()
        swapped = self.etcd(
            "kv/txn",
            {
                "compare": [{"target": "VERSION", "key": key, "result": "EQUAL", "version": str(version)}],
                "success": [{"requestPut": {"key": key, "value": value}}],
            },
        )
        if not swapped.get("succeeded"):
            raise ControlPlaneError("kube-apiserver's compactor wrote compact_rev_key at the same moment; try again")
        self.etcd("kv/compaction", {"revision": str(revision), "physical": True})
        return revision


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")


def _http_ok(url: str, *, ca: Path | None = None, token: str | None = None, insecure: bool = False) -> bool:
    context = None
    if url.startswith("https"):
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if insecure:  # the controller manager's and scheduler's self-signed serving certificates
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def wait_until(
    what: str, check: Callable[[], bool], *, timeout: float, interval: float = 0.2, process: Process | None = None
) -> None:
    """Poll `check` until it is true; fail naming `what` (and the process's last log lines) after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if process is not None and process.popen.poll() is not None:
            raise ControlPlaneError(
                f"{process.name} exited with {process.popen.returncode} before {what}:\n{process.log_tail()}"
            )
        if time.monotonic() > deadline:
            tail = f"\n{process.name}'s log ends:\n{process.log_tail()}" if process else ""
            raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting until {what}{tail}")
        time.sleep(interval)


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[ControlPlane]:
    missing = missing_binaries()
    if missing:
        raise ControlPlaneError(missing_message(missing))
    plane = ControlPlane(workdir, binaries())
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
