"""Node replacement (DESIGN "Node replacement", rule 10): drain nodes once a cheaper new node is up.

`search` chooses a replacement and proves it (rule 10), `templates` makes the new node the proof places pods on,
and `underway` reads the replacement under way back from the cluster and says its next step. The planner
(`core.planner`) is the room's only caller in the core; the room may import the core's leaves, its stages
(`fit`, `proof`, `inflight`, `ranking`) and the prices room, never the planner, the consolidation path or the
preview (an import-linter contract in pyproject.toml keeps that).
"""
