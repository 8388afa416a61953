"""The configuration: estafette compatibility, defaults, sources and every problem reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.errors import ConfigError
from compactor.settings import config

ESTAFETTE = (
    '{ "nodePools": { "mynodepool": { "enabled": true, "scaleDownCPURequestRatioLimit": 0.75, '
    '"scaleDownRequiredUnderutilizedNodeCount": 5 } } }'
)


def test_an_estafette_file_loads_unchanged_and_means_the_same() -> None:
    loaded = config.parse(ESTAFETTE, source="estafette.json")
    pool = loaded.node_pools["mynodepool"]
    assert pool.enabled and pool.cpu_limit == 0.75 and pool.required_underutilized == 5
    assert pool.memory_limit is None  # estafette looks at CPU only
    assert loaded.pool_label == "cloud.google.com/gke-nodepool"


def test_defaults_are_as_documented() -> None:
    pool = config.parse('{"nodePools": {"p": {"enabled": true, "scaleDownCPURequestRatioLimit": 0.5}}}', source="x")
    settings = pool.node_pools["p"]
    assert (
        settings.required_underutilized,
        settings.needed_marked_seconds,
        settings.minimum_node_age_seconds,
        settings.min_nodes,
        settings.scale_up_cooldown_seconds,
        settings.drain_timeout_seconds,
        settings.removal_timeout_seconds,
        settings.retry_backoff_seconds,
    ) == (1, 300, 1200, 1, 600, 900, 1800, 1800)
    assert config.parse("{}", source="x").dry_run is False
    assert config.parse('{"nodePools": {"p": {}}}', source="x").node_pools["p"].enabled is False


def test_the_estafette_environment_variables_set_the_defaults() -> None:
    env = {"NEEDED_MARKED_TIME_FOR_REMOVAL_SECONDS": "60", "MINIMUM_NODE_AGE_SECONDS": "0"}
    pool = config.parse(ESTAFETTE, source="x", env=env).node_pools["mynodepool"]
    assert (pool.needed_marked_seconds, pool.minimum_node_age_seconds) == (60, 0)
    explicit = '{"nodePools": {"p": {"neededMarkedTimeSeconds": 5}}}'
    assert config.parse(explicit, source="x", env=env).node_pools["p"].needed_marked_seconds == 5


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            '{"nodePools": {"p": {"enabled": true}}}',
            "nodePools.p: scaleDownCPURequestRatioLimit is required when the pool is enabled",
            id="enabled-without-limit",
        ),
        pytest.param(
            '{"nodePools": {"p": {"scaleDownCPURequestRatioLimit": 0}}}',
            "nodePools.p.scaleDownCPURequestRatioLimit: Input should be greater than 0",
            id="ratio-zero",
        ),
        pytest.param(
            '{"nodePools": {"p": {"scaleDownMemoryRequestRatioLimit": 1.2}}}',
            "nodePools.p.scaleDownMemoryRequestRatioLimit: Input should be less than or equal to 1",
            id="ratio-above-one",
        ),
        pytest.param(
            '{"nodePools": {"p": {"minNodes": -1}}}',
            "nodePools.p.minNodes: Input should be greater",
            id="negative-count",
        ),
        pytest.param(
            '{"nodePools": {"p": {"drainTimeoutSeconds": 1.5}}}',
            "nodePools.p.drainTimeoutSeconds: Input should be a valid integer",
            id="fractional-seconds",
        ),
        pytest.param(
            '{"nodePools": {"p": {"enabled": "yes"}}}',
            "nodePools.p.enabled: Input should be a valid boolean",
            id="string-for-boolean",
        ),
        pytest.param(
            '{"nodePools": {"p": {"scaleDownCpuRequestRatioLimit": 0.5}}}',
            "nodePools.p.scaleDownCpuRequestRatioLimit: unknown key",
            id="typo-in-a-pool",
        ),
        pytest.param('{"dryrun": true}', "dryrun: unknown key", id="typo-at-top-level"),
        pytest.param('{"poolLabel": ""}', "poolLabel: String should have at least 1 character", id="empty-label"),
        pytest.param(
            '{"placeholderNamespace": "Bad_NS!"}',
            "placeholderNamespace: 'Bad_NS!' is not a valid namespace: a namespace is a DNS-1123 label: at most 63 "
            "characters of lowercase letters",
            id="placeholder-namespace-not-a-dns-label",
        ),
        pytest.param(
            '{"placeholderNamespace": "-leading-dash"}',
            "placeholderNamespace: '-leading-dash' is not a valid namespace",
            id="placeholder-namespace-leading-dash",
        ),
        pytest.param(
            f'{{"placeholderNamespace": "{"n" * 64}"}}',
            f"placeholderNamespace: '{'n' * 64}' is not a valid namespace",
            id="placeholder-namespace-64-characters",
        ),
        pytest.param(
            '{"placeholderNamespace": ""}',
            "placeholderNamespace: '' is not a valid namespace",
            id="placeholder-namespace-empty",
        ),
        pytest.param("[]", "the configuration must be a JSON object", id="not-an-object"),
        pytest.param("{nope", "not valid JSON", id="not-json"),
    ],
)
def test_a_bad_configuration_names_the_field_and_the_reason(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.parse(text, source="cfg.json")
    assert any(problem in p and p.startswith("cfg.json") for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("name", ["node-compactor", "n" * 63, "a", "0ops-9"])
def test_a_placeholder_namespace_that_is_a_dns_label_is_taken(name: str) -> None:
    assert config.validate({"placeholderNamespace": name}, source="cfg.json").placeholder_namespace == name


def test_every_problem_is_reported_at_once() -> None:
    text = '{"nodePools": {"a": {"minNodes": -1}, "b": {"enabled": 1}}, "dryRun": "no"}'
    with pytest.raises(ConfigError) as caught:
        config.parse(text, source="x")
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize("value", ["soon", "-5"])
def test_a_bad_environment_default_is_an_error(value: str) -> None:
    with pytest.raises(ConfigError, match="environment"):
        config.parse("{}", source="x", env={"MINIMUM_NODE_AGE_SECONDS": value})


def test_an_explicit_file_wins_over_the_environment_variable(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"dryRun": False}))
    loaded = config.load_with_source({"COMPACTOR_CONFIG": '{"dryRun": true}'}, config_file=str(path))
    assert loaded.config.dry_run is False
    assert loaded.source == f"--config {path}"
    assert loaded.ignored == ("COMPACTOR_CONFIG",)
    assert loaded.notice() == f"configuration from --config {path}; COMPACTOR_CONFIG is also set and not used"
    assert config.load({"COMPACTOR_CONFIG": '{"dryRun": true}'}).dry_run is True


def test_an_explicit_file_wins_over_firestore_which_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"poolLabel": "from-file"}))

    def read(document: str, database: str | None) -> str:
        raise AssertionError("Firestore must not be read when --config names a file")

    env = {"COMPACTOR_FIRESTORE_DOCUMENT": "settings/compactor", "COMPACTOR_CONFIG": "{}"}
    loaded = config.load_with_source(env, config_file=str(path), read_firestore=read)
    assert loaded.config.pool_label == "from-file"
    assert loaded.ignored == ("COMPACTOR_FIRESTORE_DOCUMENT=settings/compactor", "COMPACTOR_CONFIG")
    assert "are also set and not used" in (loaded.notice() or "")


def test_a_missing_file_is_an_error_even_when_the_environment_holds_a_configuration(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        config.load({"COMPACTOR_CONFIG": "{}"}, config_file=str(tmp_path / "absent.json"))


@pytest.mark.parametrize(
    ("env", "source"),
    [
        pytest.param({"COMPACTOR_CONFIG": "{}"}, "COMPACTOR_CONFIG", id="environment"),
        pytest.param({}, "defaults", id="defaults"),
    ],
)
def test_the_source_is_named_when_no_file_is_given(env: dict[str, str], source: str) -> None:
    loaded = config.load_with_source(env, required=False)
    assert (loaded.source, loaded.ignored, loaded.notice()) == (source, (), None)


def test_a_yaml_text_is_told_that_json_is_expected() -> None:
    with pytest.raises(ConfigError, match="this looks like YAML; the configuration is JSON"):
        config.parse("nodePools:\n  default-pool:\n    enabled: true\n", source="c.yaml")


def test_firestore_wins_over_the_environment_variable() -> None:
    def read(document: str, database: str | None) -> str:
        assert (document, database) == ("settings/compactor", "ops")
        return '{"poolLabel": "from-firestore"}'

    env = {
        "COMPACTOR_FIRESTORE_DOCUMENT": "settings/compactor",
        "COMPACTOR_FIRESTORE_DATABASE": "ops",
        "COMPACTOR_CONFIG": '{"poolLabel": "from-env"}',
    }
    assert config.load(env, read_firestore=read).pool_label == "from-firestore"


def test_no_source_at_all_is_an_error_unless_defaults_are_allowed() -> None:
    with pytest.raises(ConfigError, match="no configuration"):
        config.load({})
    assert config.load({}, required=False).node_pools == {}


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        config.load({}, config_file=str(tmp_path / "absent.json"))
