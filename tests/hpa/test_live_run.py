"""HPA floor runs against the fake API server and the fake Prometheus, over real HTTP."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from compactor.errors import BadInputError, LeaseHeldError
from compactor.hpa import service
from compactor.hpa.model import (
    BASE_MIN_REPLICAS,
    ESTAFETTE_STATE,
    MIN_REPLICAS_REASON,
    PROMETHEUS_QUERY,
    REQUESTS_PER_REPLICA,
    ROLLOUT_CHECK,
    SCALE_DOWN_MAX_RATIO,
)
from tests.fakeapi import FakeApiServer, Fault
from tests.fakeapi import builders as k8s
from tests.fakeprometheus import FakePrometheus, Reply
from tests.hpa.conftest import RATE, annotations_of, env_for, hpa_events, min_replicas, run_hpa, scaled_hpa
from tests.integration.conftest import NOW, connector_for

QUERY = {PROMETHEUS_QUERY: RATE, REQUESTS_PER_REPLICA: "10"}


def test_a_run_raises_min_replicas_to_the_query_floor_with_one_merge_patch_and_an_event(
    api: FakeApiServer, prom: FakePrometheus
) -> None:
    api.add(scaled_hpa(annotations=QUERY, min_replicas=2, max_replicas=20))
    prom.answer(RATE, 65.0)
    result = run_hpa(api, prom)
    assert min_replicas(api) == 7
    notes = annotations_of(api)
    assert notes[BASE_MIN_REPLICAS] == "2"
    assert notes[MIN_REPLICAS_REASON].startswith("7: query floor 7")
    assert ESTAFETTE_STATE not in notes
    [patch] = api.writes_of("HorizontalPodAutoscaler")
    assert (patch.method, patch.content_type) == ("PATCH", "application/merge-patch+json")
    assert patch.body["spec"] == {"minReplicas": 7}
    [event] = hpa_events(api)
    assert (event["type"], event["reason"]) == ("Normal", "MinReplicasRaised")
    assert event["metadata"]["namespace"] == "default"
    assert result.report["hpas"][0]["newMinReplicas"] == 7
    assert result.report["hpas"][0]["floors"]["query"]["result"] == 65.0
    assert result.report["dryRun"] is False


def test_the_run_holds_its_own_lease_and_gives_it_back(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    run_hpa(api, prom)
    lease = api.get("Lease", "node-compactor-hpa", "kube-system")
    assert lease is not None
    assert lease["spec"].get("holderIdentity") is None
    assert api.get("Lease", "node-compactor", "kube-system") is None


def test_a_dry_run_writes_nothing_at_all(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(annotations=QUERY, min_replicas=2))
    api.add(scaled_hpa("broken", annotations={SCALE_DOWN_MAX_RATIO: "lots"}))
    prom.answer(RATE, 65.0)
    result = run_hpa(api, prom, dry_run=True)
    assert api.writes == []
    assert result.report["dryRun"] is True
    assert {h["name"]: h["action"] for h in result.report["hpas"]} == {"broken": "fail", "web": "raise"}


def test_the_configurations_dry_run_applies_to_this_job_too(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    run_hpa(api, prom, COMPACTOR_CONFIG='{"dryRun": true}')
    assert api.writes == []


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(status=503, error_type="unavailable", error="overloaded"), id="error"),
        pytest.param(Reply(), id="empty"),
        pytest.param(Reply(values=("10", "20")), id="multi-series"),
        pytest.param(Reply(values=("NaN",)), id="nan"),
        pytest.param(Reply(scalar="+Inf"), id="inf"),
    ],
)
def test_a_failed_query_leaves_min_replicas_with_a_warning_event_and_a_log_line_and_the_rest_go_on(
    api: FakeApiServer, prom: FakePrometheus, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    api.add(scaled_hpa(annotations={**QUERY, BASE_MIN_REPLICAS: "2"}, min_replicas=12, max_replicas=30))
    api.add(scaled_hpa("api", annotations={SCALE_DOWN_MAX_RATIO: "0.2"}, current_replicas=10, min_replicas=2))
    prom.answer(RATE, reply)
    with caplog.at_level(logging.WARNING):
        result = run_hpa(api, prom)
    assert min_replicas(api) == 12
    assert min_replicas(api, "api") == 8
    [warning] = hpa_events(api, "web")
    assert (warning["type"], warning["reason"]) == ("Warning", "MinReplicasUnchanged")
    assert RATE in warning["message"]
    assert any("default/web" in record.getMessage() and RATE in record.getMessage() for record in caplog.records)
    actions = {h["name"]: h["action"] for h in result.report["hpas"]}
    assert actions == {"api": "raise", "web": "fail"}


def test_a_timed_out_query_leaves_min_replicas(api: FakeApiServer, prom: FakePrometheus) -> None:
    from compactor.hpa import prometheus, service
    from tests.integration.conftest import connector_for

    api.add(scaled_hpa(annotations={**QUERY, BASE_MIN_REPLICAS: "2"}, min_replicas=12, max_replicas=30))
    prom.answer(RATE, Reply(values=("100",), delay=1.5))

    def quick(env: Any, deadline: float) -> service.QueryRunner:
        querier = prometheus.Querier(prom.url, timeout=0.5)
        return service.QueryRunner(querier.run, querier.close)

    result = service.run({"COMPACTOR_RUN_BUDGET_SECONDS": "60"}, connector=connector_for(api), querier_factory=quick)
    assert min_replicas(api) == 12
    assert "timed out" in result.report["hpas"][0]["reason"]


def test_a_bad_annotation_is_named_in_the_warning_event(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa("checkout", namespace="shop", annotations={SCALE_DOWN_MAX_RATIO: "20%"}, min_replicas=4))
    run_hpa(api, prom)
    assert min_replicas(api, "checkout", "shop") == 4
    [warning] = hpa_events(api, "checkout")
    assert warning["metadata"]["namespace"] == "shop"
    assert SCALE_DOWN_MAX_RATIO in warning["message"]
    assert warning["type"] == "Warning"


def test_removing_the_annotation_restores_the_owners_minimum(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(annotations=QUERY, min_replicas=2))
    prom.answer(RATE, 65.0)
    run_hpa(api, prom)
    assert min_replicas(api) == 7
    raised = api.get("HorizontalPodAutoscaler", "web", "default")
    assert raised is not None
    raised["metadata"]["annotations"]["estafette.io/hpa-scaler"] = "false"
    api.add(raised)
    run_hpa(api, prom)
    assert min_replicas(api) == 2
    assert BASE_MIN_REPLICAS not in annotations_of(api)
    assert MIN_REPLICAS_REASON not in annotations_of(api)
    assert sorted(e["reason"] for e in hpa_events(api)) == ["MinReplicasRaised", "MinReplicasRestored"]


def test_a_rollout_seen_in_the_replicasets_skips_the_ratio_floor(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(
        scaled_hpa(
            annotations={SCALE_DOWN_MAX_RATIO: "0.2", ROLLOUT_CHECK: "true"}, current_replicas=20, min_replicas=2
        )
    )
    api.add(k8s.replica_set("web-old11", deployment="web", replicas=12))
    api.add(k8s.replica_set("web-new22", deployment="web", replicas=8))
    assert run_hpa(api, prom, dry_run=True).report["hpas"][0]["newMinReplicas"] == 3
    api.add(k8s.replica_set("web-old11", deployment="web", replicas=0))
    assert run_hpa(api, prom, dry_run=True).report["hpas"][0]["newMinReplicas"] == 16


def test_replicasets_are_not_read_when_no_hpa_asks_for_the_rollout_check(
    api: FakeApiServer, prom: FakePrometheus
) -> None:
    api.add(scaled_hpa(annotations={SCALE_DOWN_MAX_RATIO: "0.2"}))
    run_hpa(api, prom, dry_run=True)
    assert not any("replicasets" in request.path for request in api.requests)


def test_an_hpa_changed_since_it_was_read_is_left_for_the_next_run(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    api.add_fault(Fault(method="PATCH", path_regex="horizontalpodautoscalers/web$", status=409))
    result = run_hpa(api, prom)
    assert min_replicas(api) == 1
    assert result.report["outcome"]["failedWrites"][0]["hpa"] == "default/web"
    assert "409" in result.report["outcome"]["failedWrites"][0]["why"]
    assert [e["type"] for e in hpa_events(api)] == ["Warning"]


def test_a_run_while_another_holds_the_lease_does_nothing(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    api.add(k8s.lease("node-compactor-hpa", holder="node-compactor-other", renew_time="2026-11-21T11:59:30.000000Z"))
    with pytest.raises(LeaseHeldError):
        run_hpa(api, prom)
    assert min_replicas(api) == 1
    assert api.writes_of("HorizontalPodAutoscaler") == []


def test_the_compactors_lease_does_not_block_this_job(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    api.add(k8s.lease("node-compactor", holder="node-compactor-other", renew_time="2026-11-21T11:59:30.000000Z"))
    run_hpa(api, prom)
    assert min_replicas(api) == 3


def test_of_two_concurrent_runs_one_acts_and_the_other_finds_the_lease_held(
    api: FakeApiServer, prom: FakePrometheus
) -> None:
    api.add(scaled_hpa(annotations=QUERY, min_replicas=2))
    prom.answer(RATE, Reply(values=("65",), delay=0.5))  # keeps the first run inside its Lease
    outcomes: list[str] = []
    lock = threading.Lock()

    def one_run() -> None:
        try:
            run_hpa(api, prom)
            outcome = "ran"
        except LeaseHeldError:
            outcome = "lease held"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["lease held", "ran"]
    assert len(api.writes_of("HorizontalPodAutoscaler")) == 1
    assert min_replicas(api) == 7


def test_bad_settings_write_nothing(api: FakeApiServer, prom: FakePrometheus) -> None:
    api.add(scaled_hpa(min_replicas=1))
    with pytest.raises(BadInputError) as raised:
        run_hpa(api, prom, MINIMUM_REPLICAS_LOWER_BOUND="three")
    assert raised.value.problems == ["MINIMUM_REPLICAS_LOWER_BOUND: 'three' is not a whole number of replicas"]
    assert api.writes == []
    assert api.requests == []


def test_the_run_summary_is_logged(api: FakeApiServer, prom: FakePrometheus, caplog: pytest.LogCaptureFixture) -> None:
    api.add(scaled_hpa(min_replicas=1))
    with caplog.at_level(logging.INFO):
        run_hpa(api, prom)
    [summary] = [r for r in caplog.records if getattr(r, "fields", {}).get("event") == "run-summary"]
    fields: dict[str, Any] = summary.fields  # type: ignore[attr-defined]
    assert fields["job"] == "hpa-floor"
    assert (fields["raised"], fields["written"], fields["failed"]) == (1, 1, 0)


def test_without_any_prometheus_configured_query_hpas_are_left_alone_and_the_rest_go_on(
    api: FakeApiServer,
) -> None:
    from compactor.hpa import service
    from tests.integration.conftest import connector_for

    api.add(scaled_hpa(annotations=QUERY, min_replicas=2))
    api.add(scaled_hpa("api", min_replicas=1))
    result = service.run({"COMPACTOR_RUN_BUDGET_SECONDS": "60"}, connector=connector_for(api))
    by_name = {h["name"]: h for h in result.report["hpas"]}
    assert by_name["web"]["action"] == "fail"
    assert "set PROMETHEUS_SERVER_URL" in by_name["web"]["reason"]
    assert min_replicas(api) == 2
    assert min_replicas(api, "api") == 3


def test_a_lease_lost_while_querying_stops_the_run_before_any_patch(api: FakeApiServer) -> None:
    from compactor.errors import LeaseLostError
    from compactor.hpa import service
    from compactor.hpa.model import Answer, Query
    from tests.integration.conftest import connector_for

    api.add(scaled_hpa(annotations=QUERY, min_replicas=2))

    def slow_prometheus(env: Any, deadline: float) -> service.QueryRunner:
        def run(queries: list[Query]) -> dict[Query, Answer]:
            # Meanwhile the Lease expired and another run took it.
            api.add(k8s.lease("node-compactor-hpa", holder="node-compactor-other"))
            return {query: Answer(65.0) for query in queries}

        return service.QueryRunner(run, lambda: None)

    with pytest.raises(LeaseLostError):
        service.run(
            {"COMPACTOR_RUN_BUDGET_SECONDS": "60"}, connector=connector_for(api), querier_factory=slow_prometheus
        )
    assert min_replicas(api) == 2
    assert api.writes_of("HorizontalPodAutoscaler") == []
    assert hpa_events(api) == []


def test_an_explicit_config_file_wins_over_compactor_config_and_the_report_says_which(
    api: FakeApiServer, prom: FakePrometheus, tmp_path: Path
) -> None:
    # COMPACTOR_CONFIG says dry run; the file named on the command line says act: the file wins.
    api.add(scaled_hpa(min_replicas=1))
    path = tmp_path / "config.json"
    path.write_text('{"dryRun": false}')
    env = env_for(prom, COMPACTOR_CONFIG='{"dryRun": true}')
    result = service.run(env, connector=connector_for(api), config_file=str(path), clock=lambda: NOW)
    assert result.report["dryRun"] is False
    assert min_replicas(api) == 3  # the lower bound, written
    assert result.report["configSource"] == f"--config {path}"
    assert result.report["warnings"] == [
        f"configuration from --config {path}; COMPACTOR_CONFIG is also set and not used"
    ]
