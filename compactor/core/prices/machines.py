"""GKE machine types and the allocatable GKE leaves to pods on them.

The machine types are every predefined type the price table prices (`pricing.predefined_types`: each family's
series and sizes as Compute Engine lists them, cloud.google.com/compute/docs/general-purpose-machines for E2,
N1, N2, N2D, N4, N4D, C3, C3D, C4 and Tau T2D, cloud.google.com/compute/docs/compute-optimized-machines for
C2D), so a family priced is a family known here, by one list. E2's shared-core types (e2-micro, e2-small,
e2-medium) are left out: GKE reserves for them by other rules than these. So are the accelerator-optimized types
(a2, a3, g2, g4): their nodes carry GPUs and GKE's GPU taint, which a shape of cpu and memory does not give, so
neither a simulated pool nor a new node of node replacement is made of them from the formula.

Allocatable is capacity minus GKE's published reservations
(cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes): CPU 6% of the
first core, 1% of the second, 0.5% of the next two and 0.25% of every core
above four; memory 25% of the first 4 GiB, 20% of the next 4, 10% of the
next 8, 6% of the next 112 and 2% above 128, plus the kubelet's 100 MiB
eviction threshold. Nominal machine memory is used, so the figures are
within a few percent of what a node reports.
"""

from __future__ import annotations

from fractions import Fraction

from compactor.core.prices import pricing
from compactor.errors import BadInputError

GIB = 2**30
MIB = 2**20
MAX_PODS = 110

# Machine type -> (vCPUs, GiB of memory).
MACHINES: dict[str, tuple[int, Fraction]] = {
    name: (int(vcpus), Fraction(gib).limit_denominator(100))
    for name, (vcpus, gib) in pricing.predefined_types().items()
    if name not in pricing.SHARED_CORE and name not in pricing.WITH_GPUS
}


def _tiered(amount: Fraction, tiers: tuple[tuple[int, Fraction], ...], beyond: Fraction) -> Fraction:
    """GKE's reservations: each tier's share of the part of `amount` in that tier, `beyond` of the rest."""
    left = amount
    reserved = Fraction(0)
    for size, share in tiers:
        part = min(left, Fraction(size))
        reserved += part * share
        left -= part
    return reserved + left * beyond


def _reserved_cpu_millis(cores: int) -> int:
    tiers = ((1, Fraction(6, 100)), (1, Fraction(1, 100)), (2, Fraction(5, 1000)))
    return int(_tiered(Fraction(cores), tiers, Fraction(25, 10000)) * 1000)


def _reserved_memory_bytes(memory_gib: Fraction) -> int:
    tiers = ((4, Fraction(25, 100)), (4, Fraction(20, 100)), (8, Fraction(10, 100)), (112, Fraction(6, 100)))
    return int(_tiered(memory_gib, tiers, Fraction(2, 100)) * GIB) + 100 * MIB


def allocatable(machine_type: str) -> dict[str, str]:
    """`status.allocatable` of a node of this machine type, as Kubernetes quantities."""
    cpu, memory = allocatable_amounts(machine_type)
    return {"cpu": f"{cpu}m", "memory": f"{memory // 1024}Ki", "pods": str(MAX_PODS)}


def allocatable_amounts(machine_type: str) -> tuple[int, int]:
    """The allocatable cpu (millicores) and memory (bytes) of a node of this machine type."""
    known = MACHINES.get(machine_type)
    if known is None:
        series = sorted({name.rsplit("-", 1)[0] for name in MACHINES})
        raise BadInputError(
            f"unknown machine type {machine_type!r}: give the pool an `allocatable` (cpu, memory), "
            f"or use a predefined type of {', '.join(series)} (Compute Engine's sizes, as e2-standard-4)"
        )
    cores, memory_gib = known
    cpu = cores * 1000 - _reserved_cpu_millis(cores)
    memory = int(memory_gib * GIB) - _reserved_memory_bytes(memory_gib)
    return cpu, memory
