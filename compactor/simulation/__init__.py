"""The savings simulator: the real planner and executor against a modelled GKE cluster over a day.

`python -m compactor simulate` runs each strategy (the Cluster Autoscaler
alone, estafette's algorithm, node-compactor) on the same starting cluster
and the same workload, and reports node-hours and their cost per day,
evictions, pending pods and PDB violations next to the lower bound.
node-compactor's node replacement runs as it does live: its placeholder pod
is admitted at priority -10, the modelled autoscaler scales up for it and the
modelled scheduler preempts it. One
concern per module: `world` (the cluster's objects), `controllers`,
`scheduler`, `autoscaler`, `port` (the executor's ClusterPort over the world),
`strategies`, `runner` (the time loop), `workers` (its strategies in forked
processes), `metrics`, `prices` (what the nodes cost, and the cost lower
bound), `report`, `plot`; `scenario` and `kubectl`
build the start.

Nothing here is part of the Cloud Function: `compactor.core`, `main.py` and
the live path never import this package (a test keeps that true). It may
import the rooms a live run uses (`actuation`, `kube`, `core`, `settings`)
and the leaves; of the entry points only `cli` imports it.
"""
