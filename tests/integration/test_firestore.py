"""Configuration read from Firestore, against the real Firestore emulator."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from google.cloud import firestore

from compactor.errors import ClusterAccessError, ConfigError
from compactor.gcp.firestore import read_config_document
from compactor.settings import config
from tests.integration.firestore_emulator import FirestoreEmulator, firestore_emulator, firestore_environment

__all__ = ["firestore_emulator", "firestore_environment"]  # fixtures, used by name

CONFIGURATION: dict[str, Any] = {
    "nodePools": {
        "default-pool": {
            "enabled": True,
            "scaleDownCPURequestRatioLimit": 0.75,
            "scaleDownMemoryRequestRatioLimit": 0.8,
            "scaleDownRequiredUnderutilizedNodeCount": 2,
            "neededMarkedTimeSeconds": 600,
        },
        "spot-pool": {"enabled": False},
    },
    "poolLabel": "cloud.google.com/gke-nodepool",
    "dryRun": True,
}
INVALID_CONFIGURATION: dict[str, Any] = {
    "nodePools": {"default-pool": {"enabled": True, "scaleDownCPURequestRatioLimit": 1.5, "minNodez": 1}},
}

_document_numbers = itertools.count()


def unique_document() -> str:
    """A document of its own for each test: the emulator's data lives for the whole session."""
    return f"compactor-tests/config-{next(_document_numbers)}"


def as_config_string(configuration: dict[str, Any]) -> dict[str, Any]:
    return {"config": orjson.dumps(configuration).decode()}


def as_fields(configuration: dict[str, Any]) -> dict[str, Any]:
    return configuration


LAYOUTS = [
    pytest.param(as_config_string, id="config-string-field"),
    pytest.param(as_fields, id="fields-are-the-configuration"),
]


def write_document(
    emulator: FirestoreEmulator, path: str, fields: dict[str, Any], *, database: str | None = None
) -> None:
    client = firestore.Client(project=emulator.project, database=database or "(default)")
    client.document(path).set(fields)


def firestore_env(document: str, **extra: str) -> dict[str, str]:
    return {config.ENV_FIRESTORE_DOCUMENT: document, **extra}


@pytest.mark.emulator
@pytest.mark.parametrize("layout", LAYOUTS)
def test_loads_a_valid_configuration_from_either_document_layout(
    firestore_environment: FirestoreEmulator, layout: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    document = unique_document()
    write_document(firestore_environment, document, layout(CONFIGURATION))

    loaded = config.load(firestore_env(document), read_firestore=read_config_document)

    assert loaded == config.validate(CONFIGURATION, source="expected")
    default_pool = loaded.enabled_pool("default-pool")
    assert default_pool is not None
    assert default_pool.cpu_limit == 0.75
    assert default_pool.required_underutilized == 2
    assert loaded.dry_run is True


@pytest.mark.emulator
@pytest.mark.parametrize("layout", LAYOUTS)
def test_reports_every_invalid_field_with_its_path_and_the_firestore_source(
    firestore_environment: FirestoreEmulator, layout: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    document = unique_document()
    write_document(firestore_environment, document, layout(INVALID_CONFIGURATION))

    with pytest.raises(ConfigError) as raised:
        config.load(firestore_env(document), read_firestore=read_config_document)

    problems = raised.value.problems
    assert len(problems) == 2, problems
    assert any(
        problem.startswith(f"firestore:{document}: nodePools.default-pool.scaleDownCPURequestRatioLimit: ")
        for problem in problems
    ), problems
    assert f"firestore:{document}: nodePools.default-pool.minNodez: unknown key (check its spelling)" in problems


@pytest.mark.emulator
def test_whole_numbers_stored_as_doubles_in_document_fields_count_as_integers(
    firestore_environment: FirestoreEmulator,
) -> None:
    document = unique_document()
    pool = {"enabled": True, "scaleDownCPURequestRatioLimit": 1.0, "neededMarkedTimeSeconds": 300.0, "minNodes": 2.0}
    write_document(firestore_environment, document, {"nodePools": {"default-pool": pool}})

    loaded = config.load(firestore_env(document), read_firestore=read_config_document)

    default_pool = loaded.enabled_pool("default-pool")
    assert default_pool is not None
    assert (default_pool.cpu_limit, default_pool.needed_marked_seconds, default_pool.min_nodes) == (1.0, 300, 2)


@pytest.mark.emulator
def test_a_missing_document_is_a_config_error_naming_document_and_database(
    firestore_environment: FirestoreEmulator,
) -> None:
    document = unique_document()

    with pytest.raises(ConfigError, match=rf"firestore document {document} not found in database \(default\)"):
        config.load(firestore_env(document), read_firestore=read_config_document)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param("compactor", id="collection-only"),
        pytest.param("compactor/config/extra", id="odd-number-of-segments"),
        pytest.param("compactor//config", id="empty-segment"),
        pytest.param("/", id="only-a-slash"),
    ],
)
def test_a_malformed_document_path_is_a_config_error_naming_the_variable(document: str) -> None:
    with pytest.raises(ConfigError, match=r"COMPACTOR_FIRESTORE_DOCUMENT=.* does not name a document"):
        config.load(firestore_env(document), read_firestore=read_config_document)


@pytest.mark.emulator
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"config": 42}, "field 'config' must be a string .*, not a number", id="config-field-a-number"),
        pytest.param(
            {"config": {"dryRun": True}}, "field 'config' must be a string .*, not a map", id="config-field-a-map"
        ),
        pytest.param(
            {"config": "{}", "dryRun": True},
            "has a field 'config' and other fields \\(dryRun\\)",
            id="config-field-next-to-other-fields",
        ),
        pytest.param({}, "has no fields", id="empty-document"),
        pytest.param(
            {"nodePools": {"default-pool": {"enabled": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}}},
            "field nodePools.default-pool.enabled holds a timestamp",
            id="timestamp-value",
        ),
    ],
)
def test_an_unexpected_document_layout_is_a_config_error_naming_the_field(
    firestore_environment: FirestoreEmulator, fields: dict[str, Any], message: str
) -> None:
    document = unique_document()
    write_document(firestore_environment, document, fields)

    with pytest.raises(ConfigError, match=message):
        read_config_document(document, None)


@pytest.mark.emulator
def test_reads_the_named_database_when_one_is_given(firestore_environment: FirestoreEmulator) -> None:
    document = unique_document()
    write_document(firestore_environment, document, as_config_string(CONFIGURATION), database="compactor-config")
    env = firestore_env(document, **{config.ENV_FIRESTORE_DATABASE: "compactor-config"})

    loaded = config.load(env, read_firestore=read_config_document)

    assert loaded.dry_run is True
    # The same path in the default database does not exist.
    with pytest.raises(ConfigError, match=r"not found in database \(default\)"):
        config.load(firestore_env(document), read_firestore=read_config_document)


@pytest.mark.emulator
def test_firestore_wins_over_the_config_environment_variable(firestore_environment: FirestoreEmulator) -> None:
    document = unique_document()
    write_document(firestore_environment, document, as_config_string({"dryRun": True}))
    env = firestore_env(document, **{config.ENV_CONFIG: '{"dryRun": false, "poolLabel": "from-env"}'})

    loaded = config.load(env, read_firestore=read_config_document)

    assert loaded.dry_run is True
    assert loaded.pool_label == config.DEFAULT_POOL_LABEL


@pytest.mark.emulator
def test_an_unreachable_firestore_is_a_cluster_access_error_within_the_deadline(
    firestore_environment: FirestoreEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on port 9 of 127.0.0.1; a short deadline keeps the test fast.
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")
    monkeypatch.setattr("compactor.gcp.firestore.TIMEOUT_SECONDS", 1.0)

    with pytest.raises(ClusterAccessError, match="cannot read firestore document compactor-tests/unreachable"):
        read_config_document("compactor-tests/unreachable", None)
