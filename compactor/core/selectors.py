"""Label selectors, node selectors and their operators, as the API server evaluates them."""

from __future__ import annotations

from collections.abc import Mapping

from compactor.core.model import LabelSelector, NodeSelectorTerm, PreferredTerm, Requirement


def requirement_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(requirement.key)
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(requirement.values) != 1:
            return False
        try:
            have, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an unknown operator never matches: the safe answer


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A None selector matches nothing; an empty one matches everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions)


def node_affinity_matches(
    terms: tuple[NodeSelectorTerm, ...] | None, node_name: str, labels: Mapping[str, str]
) -> bool:
    """Required node affinity: any term matches; an empty term matches no node."""
    if terms is None:
        return True
    return any(term_matches(term, node_name, labels) for term in terms)


def term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    """A node selector term: every requirement matches (ANDed); an empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node_name}
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        requirement_matches(r, fields) for r in term.match_fields
    )


def preferred_weight(terms: tuple[PreferredTerm, ...], node_name: str, labels: Mapping[str, str]) -> int:
    """The sum of the weights of the preferred node affinity terms the node matches: kube-scheduler's NodeAffinity
    score before it is normalized (PreferredSchedulingTerms.Score, component-helpers
    scheduling/corev1/nodeaffinity/nodeaffinity.go, v0.36.3; a term of weight 0 counts nothing)."""
    return sum(preferred.weight for preferred in terms if term_matches(preferred.term, node_name, labels))
