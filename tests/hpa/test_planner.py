"""The HPA floor planner: estafette's formulas, our clamps, and every reason to leave an HPA alone."""

from __future__ import annotations

import pytest

from compactor.hpa import planner
from compactor.hpa.model import (
    BASE_MIN_REPLICAS,
    DELTA,
    ENABLED,
    ESTAFETTE_STATE,
    MIN_REPLICAS_REASON,
    PROMETHEUS_QUERY,
    PROMETHEUS_SERVER_URL,
    REQUESTS_PER_REPLICA,
    ROLLOUT_CHECK,
    SCALE_DOWN_MAX_RATIO,
    Answer,
    Decision,
    Hpa,
    Query,
    Settings,
)
from tests.hpa.builders import cluster, hpa

SETTINGS = Settings(lower_bound=3)
RATE = "sum(rate(http_requests_total[5m]))"


def decide(
    record: Hpa, answer: Answer | None = None, settings: Settings = SETTINGS, **cluster_options: object
) -> Decision:
    answers = {} if answer is None else {Query(record.annotations.get(PROMETHEUS_SERVER_URL), RATE): answer}
    return planner.decide(record, cluster(record, **cluster_options), settings, answers)  # type: ignore[arg-type]


def floor(decision: Decision, name: str) -> int | None:
    return next(f.value for f in decision.floors if f.name == name)


# --- the query floor: ceil(delta + result / requestsPerReplica) ---------------------------------------------


@pytest.mark.parametrize(
    ("result", "per_replica", "delta", "expected"),
    [
        pytest.param(225.4, "50", None, 5, id="ceil-of-4.5"),
        pytest.param(200.0, "50", None, 4, id="exact-division-is-not-rounded-up"),
        pytest.param(200.0, "50", "2", 6, id="delta-is-added-before-ceil"),
        pytest.param(201.0, "50", "-1.5", 3, id="negative-delta"),
        pytest.param(0.0, "50", None, 0, id="no-traffic-is-floor-zero"),
        pytest.param(7.0, None, None, 7, id="requests-per-replica-defaults-to-1"),
        pytest.param(1e-9, "1", None, 1, id="any-positive-rate-needs-a-pod"),
    ],
)
def test_the_query_floor_is_estafettes_formula(
    result: float, per_replica: str | None, delta: str | None, expected: int
) -> None:
    annotations = {PROMETHEUS_QUERY: RATE}
    if per_replica is not None:
        annotations[REQUESTS_PER_REPLICA] = per_replica
    if delta is not None:
        annotations[DELTA] = delta
    decision = decide(hpa(annotations=annotations, min_replicas=1, max_replicas=100), Answer(result))
    assert floor(decision, "query") == expected


@pytest.mark.parametrize("per_replica", [pytest.param("0", id="zero"), pytest.param("-5", id="negative")])
def test_the_query_floor_does_not_apply_when_requests_per_replica_is_not_positive(per_replica: str) -> None:
    record = hpa(annotations={PROMETHEUS_QUERY: RATE, REQUESTS_PER_REPLICA: per_replica})
    assert planner.queries(cluster(record), SETTINGS) == []
    decision = decide(record)
    assert floor(decision, "query") is None
    assert decision.action != "fail"


def test_a_query_floor_above_the_others_raises_min_replicas_and_says_why() -> None:
    decision = decide(
        hpa(annotations={PROMETHEUS_QUERY: RATE, REQUESTS_PER_REPLICA: "10"}, min_replicas=2), Answer(65.0)
    )
    assert decision.action == "raise"
    assert decision.new_min_replicas == 7
    assert "query floor 7" in decision.reason
    assert decision.patch is not None
    assert decision.patch["spec"] == {"minReplicas": 7}


# --- the ratio floor: current - max(1, floor(current x r)) ----------------------------------------------------


@pytest.mark.parametrize(
    ("current", "ratio", "expected"),
    [
        pytest.param(10, "0.2", 8, id="a-fifth-of-ten"),
        pytest.param(10, "0.25", 8, id="floor-rounds-the-step-down"),
        pytest.param(3, "0.2", 2, id="at-least-one-pod-may-go"),
        pytest.param(1, "0.5", 0, id="one-replica-may-go-to-zero-floor"),
        pytest.param(10, "1", 0, id="ratio-one-allows-everything"),
        pytest.param(100, "0.01", 99, id="small-ratio"),
    ],
)
def test_the_ratio_floor_is_estafettes_formula(current: int, ratio: str, expected: int) -> None:
    decision = decide(
        hpa(annotations={SCALE_DOWN_MAX_RATIO: ratio}, current_replicas=current, min_replicas=1, max_replicas=200)
    )
    assert floor(decision, "ratio") == expected


def test_without_a_ratio_annotation_there_is_no_ratio_floor() -> None:
    assert floor(decide(hpa(current_replicas=50, max_replicas=100)), "ratio") is None


def test_no_ratio_floor_before_the_controller_reports_current_replicas() -> None:
    decision = decide(hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.2"}, current_replicas=None))
    assert floor(decision, "ratio") is None


# --- the rollout check ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "active", "expected"),
    [
        pytest.param("true", 2, None, id="rolling-out-skips-the-ratio-floor"),
        pytest.param("true", 1, 16, id="one-replicaset-is-no-rollout"),
        pytest.param("true", 0, 16, id="no-replicasets-is-no-rollout"),
        pytest.param("false", 2, 16, id="check-off-keeps-the-floor"),
    ],
)
def test_the_ratio_floor_is_skipped_only_while_the_target_deployment_rolls_out(
    check: str, active: int, expected: int | None
) -> None:
    record = hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.2", ROLLOUT_CHECK: check}, current_replicas=20, max_replicas=50)
    decision = decide(record, rollouts={("default", "web"): active})
    assert floor(decision, "ratio") == expected


def test_the_rollout_check_counts_only_the_target_deployments_replicasets() -> None:
    record = hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.2", ROLLOUT_CHECK: "true"}, current_replicas=20, max_replicas=50)
    decision = decide(record, rollouts={("default", "api"): 3, ("other", "web"): 2})
    assert floor(decision, "ratio") == 16


# --- the new minimum: max(floors, lower bound, base), capped at maxReplicas -----------------------------------


def test_the_lower_bound_applies_when_it_is_the_highest() -> None:
    decision = decide(hpa(min_replicas=1, max_replicas=10))
    assert decision.new_min_replicas == 3
    assert decision.action == "raise"


def test_the_lower_bound_is_configurable() -> None:
    decision = decide(hpa(min_replicas=1, max_replicas=10), settings=Settings(lower_bound=0))
    assert decision.new_min_replicas == 1
    assert decision.action == "none"


def test_never_below_the_owners_minimum() -> None:
    decision = decide(hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.5"}, min_replicas=8, current_replicas=10))
    assert floor(decision, "ratio") == 5
    assert decision.new_min_replicas == 8
    assert decision.action == "none"


def test_never_below_the_recorded_owners_minimum_when_lowering_again() -> None:
    record = hpa(annotations={BASE_MIN_REPLICAS: "6", SCALE_DOWN_MAX_RATIO: "0.5"}, min_replicas=9, current_replicas=4)
    decision = decide(record)
    assert decision.action == "lower"
    assert decision.new_min_replicas == 6


def test_a_floor_above_max_replicas_is_capped_and_max_replicas_is_never_touched() -> None:
    record = hpa(annotations={PROMETHEUS_QUERY: RATE}, min_replicas=2, max_replicas=10)
    decision = decide(record, Answer(40.0))
    assert decision.new_min_replicas == 10
    assert decision.capped
    assert "capped at maxReplicas 10" in decision.reason
    assert decision.patch is not None
    assert "maxReplicas" not in decision.patch["spec"]


def test_min_replicas_comes_down_when_the_load_does() -> None:
    record = hpa(annotations={BASE_MIN_REPLICAS: "2", PROMETHEUS_QUERY: RATE}, min_replicas=9, max_replicas=20)
    decision = decide(record, Answer(4.0))
    assert decision.action == "lower"
    assert decision.new_min_replicas == 4


def test_nothing_is_written_when_min_replicas_would_not_change() -> None:
    decision = decide(hpa(min_replicas=3))
    assert decision.action == "none"
    assert decision.patch is None


# --- base minimum: recorded on the first change, restored when disabled ---------------------------------------


def test_the_first_change_records_the_owners_minimum_and_the_reason() -> None:
    decision = decide(hpa(min_replicas=2, resource_version="41"))
    assert decision.patch is not None
    annotations = decision.patch["metadata"]["annotations"]
    assert annotations[BASE_MIN_REPLICAS] == "2"
    assert annotations[MIN_REPLICAS_REASON].startswith("3: lower bound 3")
    assert decision.patch["metadata"]["resourceVersion"] == "41"
    assert ESTAFETTE_STATE not in annotations


def test_a_later_change_keeps_the_recorded_minimum() -> None:
    decision = decide(hpa(annotations={BASE_MIN_REPLICAS: "2"}, min_replicas=5, max_replicas=20))
    assert decision.action == "lower"
    assert decision.patch is not None
    assert BASE_MIN_REPLICAS not in decision.patch["metadata"]["annotations"]


@pytest.mark.parametrize(
    "enabled", [pytest.param(None, id="annotation-removed"), pytest.param("false", id="set-to-false")]
)
def test_disabling_restores_the_owners_minimum_and_forgets_our_annotations(enabled: str | None) -> None:
    annotations = {BASE_MIN_REPLICAS: "2", MIN_REPLICAS_REASON: "7: ..."}
    if enabled is not None:
        annotations[ENABLED] = enabled
    decision = decide(hpa(enabled=False, annotations=annotations, min_replicas=7))
    assert decision.action == "restore"
    assert decision.new_min_replicas == 2
    assert decision.patch is not None
    assert decision.patch["spec"] == {"minReplicas": 2}
    assert decision.patch["metadata"]["annotations"] == {BASE_MIN_REPLICAS: None, MIN_REPLICAS_REASON: None}


def test_an_hpa_we_never_touched_is_not_ours_to_restore() -> None:
    decision = decide(hpa(enabled=False, min_replicas=7))
    assert decision.action == "skip"
    assert decision.patch is None


# --- failure is never a scale-down ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        pytest.param({REQUESTS_PER_REPLICA: "fifty"}, REQUESTS_PER_REPLICA, id="requests-per-replica-not-a-number"),
        pytest.param({DELTA: "NaN"}, DELTA, id="delta-nan"),
        pytest.param({SCALE_DOWN_MAX_RATIO: "20%"}, SCALE_DOWN_MAX_RATIO, id="ratio-percent"),
        pytest.param({SCALE_DOWN_MAX_RATIO: "0"}, SCALE_DOWN_MAX_RATIO, id="ratio-zero"),
        pytest.param({SCALE_DOWN_MAX_RATIO: "1.5"}, SCALE_DOWN_MAX_RATIO, id="ratio-above-one"),
        pytest.param({ROLLOUT_CHECK: "yes"}, ROLLOUT_CHECK, id="rollout-check-not-boolean"),
        pytest.param({BASE_MIN_REPLICAS: "two"}, BASE_MIN_REPLICAS, id="base-not-a-number"),
        pytest.param({BASE_MIN_REPLICAS: "0"}, BASE_MIN_REPLICAS, id="base-zero"),
        pytest.param({PROMETHEUS_SERVER_URL: "ftp://prom"}, PROMETHEUS_SERVER_URL, id="server-not-http"),
        pytest.param(
            {PROMETHEUS_SERVER_URL: "http://evil.example:9090"}, PROMETHEUS_SERVER_URL, id="server-not-allowlisted"
        ),
    ],
)
def test_a_bad_annotation_leaves_min_replicas_and_names_the_hpa_and_the_annotation(
    annotations: dict[str, str], named: str
) -> None:
    decision = decide(hpa("checkout", namespace="shop", annotations=annotations, min_replicas=9, current_replicas=10))
    assert decision.action == "fail"
    assert decision.patch is None
    assert decision.new_min_replicas is None
    assert named in decision.reason
    assert "minReplicas left at 9" in decision.reason
    assert decision.hpa.key == "shop/checkout"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(Answer.failed("HTTP 503 unavailable: overloaded"), id="error"),
        pytest.param(Answer.failed("timed out after 10s"), id="timeout"),
        pytest.param(Answer.failed("the query returned no series"), id="empty"),
        pytest.param(Answer.failed("the query returned 2 series"), id="multi-series"),
        pytest.param(Answer.failed("the query returned nan, not a finite number"), id="nan"),
        pytest.param(None, id="no-answer-at-all"),
    ],
)
def test_a_failed_query_leaves_a_raised_minimum_where_it_is(answer: Answer | None) -> None:
    record = hpa(annotations={PROMETHEUS_QUERY: RATE, BASE_MIN_REPLICAS: "2"}, min_replicas=12, max_replicas=20)
    decision = decide(record, answer)
    assert decision.action == "fail"
    assert decision.patch is None
    assert RATE in decision.reason


def test_an_allowlisted_per_hpa_server_is_queried_there() -> None:
    record = hpa(annotations={PROMETHEUS_QUERY: RATE, PROMETHEUS_SERVER_URL: "http://prom.monitoring:9090"})
    settings = Settings(allowed_hosts=frozenset({"prom.monitoring:9090"}))
    assert planner.queries(cluster(record), settings) == [Query("http://prom.monitoring:9090", RATE)]


# --- coexistence ----------------------------------------------------------------------------------------------


def test_an_hpa_managed_by_kube_downscaler_is_left_alone() -> None:
    record = hpa(annotations={"downscaler/downtime-replicas": "1", BASE_MIN_REPLICAS: "2"}, min_replicas=1)
    decision = decide(record)
    assert decision.action == "skip"
    assert decision.patch is None
    assert "downscaler/downtime-replicas" in decision.reason
    assert (
        planner.queries(cluster(hpa(annotations={"downscaler/exclude": "true", PROMETHEUS_QUERY: RATE})), SETTINGS)
        == []
    )


def test_identical_queries_are_sent_once() -> None:
    records = [hpa(f"web-{i}", annotations={PROMETHEUS_QUERY: RATE}) for i in range(5)]
    assert planner.queries(cluster(*records), SETTINGS) == [Query(None, RATE)]


def test_only_enabled_hpas_with_the_rollout_check_need_replicasets() -> None:
    assert not planner.needs_replica_sets(cluster(hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.2"})))
    assert not planner.needs_replica_sets(cluster(hpa(enabled=False, annotations={ROLLOUT_CHECK: "true"})))
    assert planner.needs_replica_sets(cluster(hpa(annotations={ROLLOUT_CHECK: "true"})))


def test_an_owners_edit_of_min_replicas_since_our_last_write_becomes_the_new_base() -> None:
    # We set 7 over a base of 2; a person (or a GitOps sync) then set 10.
    record = hpa(annotations={BASE_MIN_REPLICAS: "2", MIN_REPLICAS_REASON: "7: query floor 7"}, min_replicas=10)
    decision = decide(record)
    assert decision.action == "none"
    assert decision.new_min_replicas == 10
    assert "changed from the 7 we set" in next(f.detail for f in decision.floors if f.name == "base")


def test_an_owners_edit_is_recorded_as_the_base_with_the_next_change() -> None:
    record = hpa(
        annotations={BASE_MIN_REPLICAS: "2", MIN_REPLICAS_REASON: "7: ...", PROMETHEUS_QUERY: RATE},
        min_replicas=4,
        max_replicas=30,
    )
    decision = decide(record, Answer(12.0))
    assert decision.action == "raise"
    assert decision.patch is not None
    assert decision.patch["metadata"]["annotations"][BASE_MIN_REPLICAS] == "4"


def test_disabling_after_an_owners_edit_keeps_their_value() -> None:
    record = hpa(enabled=False, annotations={BASE_MIN_REPLICAS: "2", MIN_REPLICAS_REASON: "7: ..."}, min_replicas=5)
    decision = decide(record)
    assert decision.action == "restore"
    assert decision.new_min_replicas == 5
    assert decision.patch is not None
    assert "spec" not in decision.patch


def test_the_table_shows_each_hpa_with_its_floors_new_minimum_and_why() -> None:
    from compactor.hpa import report

    capped = hpa("web", annotations={PROMETHEUS_QUERY: RATE}, min_replicas=2, max_replicas=10, current_replicas=4)
    plan = planner.plan(cluster(capped), SETTINGS, {Query(None, RATE): Answer(40.0)})
    header, row = report.to_table(plan).splitlines()
    assert header.split()[:8] == ["HPA", "CURRENT", "MIN", "MAX", "QUERY", "RATIO", "NEW", "MIN"]
    assert row.split()[:9] == ["default/web", "4", "2", "10", "40", "-", "10", "(capped)", "raise"]
    assert "capped at maxReplicas 10" in row
    assert report.to_table(planner.plan(cluster(), SETTINGS, {})) == "no HorizontalPodAutoscalers\n"
