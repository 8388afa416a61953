"""Rule 8 with prices on the live path: the drain the plan ranks first by saving per disrupted pod is the one the
executor validates and starts, with the priceFile's prices in both plans (DESIGN rule 8, "Rule 8 with prices")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compactor.core.model import DRAIN_STARTED_AT
from compactor.core.prices import pricing
from tests.fakeapi import FakeApiServer
from tests.fakeapi import builders as k8s
from tests.integration.conftest import MARKED, POOL_CONFIG, env_with, node_annotations, run_once

REGION = "europe-west1"


def a_price_file(tmp_path: Path) -> Path:
    """The built-in table with e2 in europe-west1 made three times dearer than n2: a run that ranks with the
    built-in table instead would pick the other node."""
    rates = dict(pricing.BUILT_IN.rates)
    for key, value in list(rates.items()):
        family, region, _ = key
        if family == "e2" and region == REGION:
            rates[key] = pricing.Rates(value.vcpu_hour * 3, value.gib_hour * 3)
    table = pricing.PriceTable("2026-12-01", "a test's price file", pricing.BUILT_IN.currency, rates)
    path = tmp_path / "prices.json"
    path.write_bytes(pricing.to_json(table))
    return path


def cluster(api: FakeApiServer) -> None:
    """e2 and n2 are light, marked, and hold two pods each; spare takes either's."""
    for name, machine in (("e2", "e2-standard-4"), ("n2", "n2-standard-4")):
        api.add(k8s.node(name, machine_type=machine, annotations={"node-compactor.dev/underutilized-since": MARKED}))
        for index in range(2):
            api.add(k8s.pod(f"{name}-web-{index}", node=name, cpu="200m"))
    api.add(k8s.node("spare", machine_type="e2-standard-4"))
    api.add(k8s.pod("spare-0", node="spare", cpu="3200m"))


def config(price_file: Path | None, ranking: str = "savings") -> dict[str, Any]:
    found: dict[str, Any] = {"nodePools": {"default-pool": {**POOL_CONFIG, "minNodes": 0}}, "ranking": ranking}
    if price_file is not None:
        found["priceFile"] = str(price_file)
    return found


def test_the_built_in_table_ranks_the_dearer_n2_node_first(api: FakeApiServer) -> None:
    cluster(api)
    result = run_once(api, env=env_with(config(None)))
    assert result.report["decision"]["action"] == "drain"
    assert result.report["decision"]["node"] == "n2"
    assert DRAIN_STARTED_AT in node_annotations(api, "n2")


def test_the_price_file_s_prices_rank_the_drain_and_its_validation_alike(api: FakeApiServer, tmp_path: Path) -> None:
    cluster(api)
    result = run_once(api, env=env_with(config(a_price_file(tmp_path))))
    decision = result.report["decision"]
    assert decision["action"] == "drain", decision
    assert decision["node"] == "e2"
    assert "saves the most per disrupted pod" in decision["reason"]
    assert DRAIN_STARTED_AT in node_annotations(api, "e2"), "the executor's second plan must agree with the first"
    assert DRAIN_STARTED_AT not in node_annotations(api, "n2")


def test_ranking_by_disruption_ignores_the_prices(api: FakeApiServer, tmp_path: Path) -> None:
    cluster(api)
    result = run_once(api, env=env_with(config(a_price_file(tmp_path), ranking="disruption")))
    assert result.report["decision"]["node"] == "e2"  # rule 8: as many pods, then the name
    assert "least disruptive" in result.report["decision"]["reason"]
