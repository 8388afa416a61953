"""`plan` reads its configuration from Firestore too, first of all sources (the real emulator)."""

from __future__ import annotations

import json

import pytest

from compactor import cli
from tests.integration.firestore_emulator import FirestoreEmulator, firestore_emulator  # noqa: F401


def test_plan_takes_its_configuration_from_firestore_before_the_file(
    firestore_emulator: FirestoreEmulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from google.cloud import firestore

    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    monkeypatch.delenv("COMPACTOR_CONFIG", raising=False)
    with open("examples/config.json") as stream:
        settings = json.load(stream)
    settings["dryRun"] = True
    firestore.Client(project=firestore_emulator.project).collection("compactor").document("plan").set(
        {"config": json.dumps(settings)}
    )
    monkeypatch.setenv("COMPACTOR_FIRESTORE_DOCUMENT", "compactor/plan")
    code = cli.main(
        [
            "plan",
            "--snapshot",
            "examples/offpeak-snapshot.json",
            "--config",
            "/nonexistent.json",
            "--now",
            "2026-11-21T03:00:00Z",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["dryRun"] is True, "the Firestore document, not the (missing) file, was used"
    assert report["decision"]["action"] == "drain"
