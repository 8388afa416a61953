"""GKE machine types and the allocatable GKE leaves to pods on them.

Allocatable is capacity minus GKE's published reservations: CPU 6% of the
first core, 1% of the second, 0.5% of the next two and 0.25% of every core
above four; memory 25% of the first 4 GiB, 20% of the next 4, 10% of the
next 8, 6% of the next 112 and 2% above 128, plus the kubelet's 100 MiB
eviction threshold. Nominal machine memory is used, so the figures are
within a few percent of what a node reports.
"""

from __future__ import annotations

from fractions import Fraction

from compactor.errors import BadInputError

GIB = 2**30
MIB = 2**20
MAX_PODS = 110

# GiB of memory per vCPU for each machine family we know.
_FAMILIES: dict[str, Fraction] = {
    "e2-standard": Fraction(4),
    "e2-highmem": Fraction(8),
    "e2-highcpu": Fraction(1),
    "n2-standard": Fraction(4),
    "n2-highmem": Fraction(8),
    "n2-highcpu": Fraction(1),
    "n2d-standard": Fraction(4),
    "n2d-highmem": Fraction(8),
    "c3-standard": Fraction(4),
    "n1-standard": Fraction(15, 4),
    "n1-highmem": Fraction(13, 2),
}
_SIZES = (2, 4, 8, 16, 32, 48, 64)

MACHINES: dict[str, tuple[int, Fraction]] = {
    f"{family}-{size}": (size, ratio * Fraction(size)) for family, ratio in _FAMILIES.items() for size in _SIZES
}


def _reserved_cpu_millis(cores: int) -> int:
    steps = ((1, Fraction(6, 100)), (1, Fraction(1, 100)), (2, Fraction(5, 1000)))
    left = Fraction(cores)
    reserved = Fraction(0)
    for size, share in steps:
        part = min(left, Fraction(size))
        reserved += part * share
        left -= part
    reserved += left * Fraction(25, 10000)
    return int(reserved * 1000)


def _reserved_memory_bytes(memory_gib: Fraction) -> int:
    steps = ((4, Fraction(25, 100)), (4, Fraction(20, 100)), (8, Fraction(10, 100)), (112, Fraction(6, 100)))
    left = memory_gib
    reserved = Fraction(0)
    for size, share in steps:
        part = min(left, Fraction(size))
        reserved += part * share
        left -= part
    reserved += left * Fraction(2, 100)
    return int(reserved * GIB) + 100 * MIB


def allocatable(machine_type: str) -> dict[str, str]:
    """`status.allocatable` of a node of this machine type, as Kubernetes quantities."""
    cpu, memory = allocatable_amounts(machine_type)
    return {"cpu": f"{cpu}m", "memory": f"{memory // 1024}Ki", "pods": str(MAX_PODS)}


def allocatable_amounts(machine_type: str) -> tuple[int, int]:
    """The allocatable cpu (millicores) and memory (bytes) of a node of this machine type."""
    known = MACHINES.get(machine_type)
    if known is None:
        names = ", ".join(sorted({name.rsplit("-", 1)[0] for name in MACHINES}))
        raise BadInputError(
            f"unknown machine type {machine_type!r}: give the pool an `allocatable` (cpu, memory), "
            f"or use one of the families {names} with {', '.join(str(s) for s in _SIZES)} vCPUs"
        )
    cores, memory_gib = known
    cpu = cores * 1000 - _reserved_cpu_millis(cores)
    memory = int(memory_gib * GIB) - _reserved_memory_bytes(memory_gib)
    return cpu, memory
