"""A PodDisruptionBudget index made from the last one (`PdbIndex.updated`, the simulator's next view): what it
carries over must be what a new index finds, budget for budget."""

from __future__ import annotations

from compactor.core import blockers
from compactor.core.cluster import ClusterView, PdbIndex
from compactor.core.model import Pdb
from compactor.settings.config import Config
from tests.builders import make_config, make_node, make_pdb, make_pod, make_snapshot


def _view(pdbs: tuple[Pdb, ...], config: Config) -> ClusterView:
    web = {"app": "web"}
    pods = [make_pod(f"web-{i}", node=f"n{i % 2 + 1}", labels=web) for i in range(4)]
    pods.append(make_pod("db-0", node="n2", labels={"app": "db"}))
    return ClusterView(make_snapshot([make_node("n1"), make_node("n2")], pods, pdbs), config)


def _found(view: ClusterView, index: PdbIndex, config: Config) -> dict[str, list[blockers.Blocker]]:
    return {name: blockers.node_pods_blockers(state.pods, index, config) for name, state in view.nodes.items()}


def test_a_budget_whose_status_changed_blocks_with_its_new_record_the_others_kept_as_found() -> None:
    config = make_config()
    before = (make_pdb("web", match={"app": "web"}, allowed=1), make_pdb("db", match={"app": "db"}, allowed=1))
    view = _view(before, config)
    assert _found(view, view.pdbs, config) == {"n1": [], "n2": []}
    after = (make_pdb("web", match={"app": "web"}, allowed=0), before[1])  # a web pod went unready
    index = view.pdbs.updated(after, view.nodes.values())
    assert index.pods_found == {}, "both nodes hold a web pod: nothing found before holds"
    found = _found(view, index, config)
    assert found == _found(view, PdbIndex(after), config)
    assert [b.kind for b in found["n1"]] == ["pdb", "pdb"]
    assert list(index.covering(view.nodes["n1"].pods[0])) == [after[0]], "the new record, taken from the last match"


def test_a_node_whose_budgets_are_the_same_records_keeps_its_blockers_and_a_new_selector_keeps_nothing() -> None:
    config = make_config()
    web, db = make_pdb("web", match={"app": "web"}, allowed=1), make_pdb("db", match={"app": "db"}, allowed=1)
    view = _view((web, db), config)
    _found(view, view.pdbs, config)
    n2 = view.nodes["n2"].pods
    after = (web, make_pdb("db", match={"app": "db"}, allowed=0))
    index = view.pdbs.updated(after, view.nodes.values())
    kept = [entry[0] for entry in index.pods_found.values()]
    assert kept == [view.nodes["n1"].pods], "n1's pods are covered by `web` alone, the same record"
    assert _found(view, index, config) == _found(view, PdbIndex(after), config)
    assert [b.kind for b in _found(view, index, config)["n2"]] == ["pdb"]
    assert n2 is view.nodes["n2"].pods
    reselected = (make_pdb("web", match={"app": "db"}, allowed=1), db)
    index = view.pdbs.updated(reselected, view.nodes.values())
    assert index.pods_found == {} and index.covering_known == {}
    assert _found(view, index, config) == _found(view, PdbIndex(reselected), config)
