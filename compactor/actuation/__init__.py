"""What a run does to the cluster: carrying out a plan.

`executor` follows the drain state machine (docs/drain-states.md): cordon,
evict in proven batches, roll back; `tainting` writes the soft taints,
`deletioncost` the scale-down steering, `surging` the rolling restart of a
single replica. Modules here may import `compactor.kube`, `compactor.core`,
`compactor.settings` and the leaves; never `gcp` or an entry point.
"""
