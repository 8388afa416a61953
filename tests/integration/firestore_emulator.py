"""The Firestore emulator (`gcloud emulators firestore start`) as pytest fixtures.

One emulator serves the whole test session on 127.0.0.1; tests that use it
take `firestore_environment`, which points the Firestore client at it for that
test only. Reuse from another test module with
`from tests.integration.firestore_emulator import firestore_emulator, firestore_environment`.

A missing `gcloud` is a test failure with instructions, never a silent skip:
these tests are the only proof that Firestore configuration works.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT = "node-compactor-test"
READY_LINE = "Dev App Server is now running"
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class FirestoreEmulator:
    host: str  # host:port, the form FIRESTORE_EMULATOR_HOST takes
    project: str
    log: Path


@pytest.fixture(scope="session")
def firestore_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirestoreEmulator]:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        pytest.fail(
            "gcloud is not installed, so the Firestore emulator cannot start. Install the Google Cloud SDK, "
            "its cloud-firestore-emulator component (gcloud components install cloud-firestore-emulator, "
            "or the google-cloud-cli-firestore-emulator package) and Java 11+.",
            pytrace=False,
        )
    workdir = tmp_path_factory.mktemp("firestore-emulator")
    log = workdir / "emulator.log"
    host = f"127.0.0.1:{_free_port()}"
    environment = {
        **os.environ,
        # A gcloud configuration of its own: the emulator keeps its state there,
        # and the developer's gcloud settings stay untouched.
        "CLOUDSDK_CONFIG": str(workdir / "gcloud-config"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
    }
    with log.open("wb") as log_stream:
        # gcloud starts a Java child; a session of its own lets teardown stop both.
        process = subprocess.Popen(
            [gcloud, "emulators", "firestore", "start", f"--host-port={host}"],
            stdin=subprocess.DEVNULL,
            stdout=log_stream,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    try:
        _wait_until_ready(process, log)
        yield FirestoreEmulator(host=host, project=PROJECT, log=log)
    finally:
        _stop(process)


@pytest.fixture
def firestore_environment(firestore_emulator: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch) -> FirestoreEmulator:
    """Points Firestore clients built during this test at the emulator."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    monkeypatch.delenv("GCLOUD_PROJECT", raising=False)
    return firestore_emulator


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_ready(process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if READY_LINE in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            _stop(process)
            pytest.fail(
                f"the Firestore emulator exited with status {process.returncode} before it was ready:\n{_tail(log)}",
                pytrace=False,
            )
        time.sleep(0.1)
    _stop(process)
    pytest.fail(
        f"the Firestore emulator was not ready after {START_TIMEOUT_SECONDS:.0f} s:\n{_tail(log)}", pytrace=False
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    for stop_signal in (signal.SIGTERM, signal.SIGKILL):
        try:
            # The group is the one start_new_session created: gcloud and its Java child.
            os.killpg(process.pid, stop_signal)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
            # gcloud may be gone while Java still shuts down: wait for the group too.
            if _group_gone(process.pid):
                break
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _group_gone(group: int, wait_seconds: float = STOP_TIMEOUT_SECONDS) -> bool:
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
