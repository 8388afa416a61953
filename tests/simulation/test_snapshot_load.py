"""`simulate --snapshot` reads kubectl's layout item by item, at any size, as `plan --snapshot` does; any other
file as one document, up to `kubectl.MAX_SNAPSHOT_BYTES`, whose errors say what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.errors import SnapshotError
from compactor.simulation import kubectl

EXAMPLE = Path("examples/offpeak-snapshot.json")  # as kubectl prints it: indented, one item after another


def _compact(tmp_path: Path) -> Path:
    path = tmp_path / "compact.json"
    path.write_text(json.dumps(json.loads(EXAMPLE.read_text())))
    return path


def test_kubectls_layout_read_item_by_item_gives_the_setup_of_the_whole_document(tmp_path: Path) -> None:
    streamed = kubectl.load(str(EXAMPLE), config=None, hours=1)
    whole = kubectl.load(str(_compact(tmp_path)), config=None, hours=1)
    assert streamed.pools == whole.pools and streamed.workloads == whole.workloads
    assert streamed.pdbs == whole.pdbs and streamed.start == whole.start
    assert len(streamed.workloads) > 3


def test_a_snapshot_over_the_one_document_limit_loads_in_kubectls_layout_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kubectl, "MAX_SNAPSHOT_BYTES", 4096)
    assert EXAMPLE.stat().st_size > 4096
    assert kubectl.load(str(EXAMPLE), config=None, hours=1).pools
    with pytest.raises(SnapshotError, match="is larger than 4096 bytes"):
        kubectl.load(str(_compact(tmp_path)), config=None, hours=1)


def test_a_broken_item_in_kubectls_layout_is_named_by_the_document_reader(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    broken = tmp_path / "broken.json"
    broken.write_text(text.replace('"kind": "Node"', '"kind": Node', 1))
    with pytest.raises(SnapshotError, match="is not JSON"):
        kubectl.load(str(broken), config=None, hours=1)
