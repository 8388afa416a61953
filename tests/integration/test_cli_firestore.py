"""`plan` and Firestore (the real emulator): without --config FILE the document is the configuration."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compactor import cli
from tests.integration.firestore_emulator import FirestoreEmulator, firestore_emulator  # noqa: F401


def plan_json(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(
        ["plan", "--snapshot", "examples/offpeak-snapshot.json", "--now", "2026-11-21T03:00:00Z", "--json", *extra]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def gpu_pool_enabled(report: dict[str, Any]) -> bool:
    enabled: bool = next(pool["enabled"] for pool in report["pools"] if pool["name"] == "gpu-pool")
    return enabled


@pytest.fixture
def firestore_document(
    firestore_emulator: FirestoreEmulator,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """examples/config.json with gpu-pool not enabled, in the Firestore document COMPACTOR_FIRESTORE_DOCUMENT names."""
    from google.cloud import firestore

    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator.host)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", firestore_emulator.project)
    monkeypatch.delenv("COMPACTOR_CONFIG", raising=False)
    with open("examples/config.json") as stream:
        settings = json.load(stream)
    settings["nodePools"]["gpu-pool"]["enabled"] = False
    firestore.Client(project=firestore_emulator.project).collection("compactor").document("plan").set(
        {"config": json.dumps(settings)}
    )
    monkeypatch.setenv("COMPACTOR_FIRESTORE_DOCUMENT", "compactor/plan")
    return "compactor/plan"


def test_plan_without_config_takes_its_configuration_from_firestore(
    firestore_document: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = plan_json(capsys)
    assert code == 0, err
    assert gpu_pool_enabled(report) is False, "the Firestore document was used"
    assert report["configSource"] == f"firestore:{firestore_document}"
    assert report["decision"]["action"] == "drain"


def test_an_explicit_config_file_wins_over_firestore(
    firestore_document: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = plan_json(capsys, "--config", "examples/config.json")
    assert code == 0, err
    assert gpu_pool_enabled(report) is True, "the file, not the Firestore document, was used"
    assert report["configSource"] == "--config examples/config.json"
    assert f"COMPACTOR_FIRESTORE_DOCUMENT={firestore_document} is also set and not used" in err


def test_a_missing_config_file_is_an_error_even_with_firestore_set(
    firestore_document: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = plan_json(capsys, "--config", "/nonexistent.json")
    assert (code, report) == (2, {})
    assert "cannot read config file /nonexistent.json" in err
