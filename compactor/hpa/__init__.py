"""The HPA floor: node-compactor's second job (`main.hpa_floor`, `python -m compactor hpa`).

It reads estafette-k8s-hpa-scaler's annotations on HorizontalPodAutoscalers
and raises (or lowers back) their `minReplicas` so that a failing service is
not scaled in and one step never removes more than a set share of its pods.
The floors are computed by a pure planner (`planner`) from records
(`model`, read by `reading`) and query answers (`results`); the adapters
(`cluster`, `prometheus`) and the shell (`service`, `http`, `command`) do the
I/O. It never touches `maxReplicas`, nor estafette's own state annotation.
It may import the compactor's shell it shares (`service`, `http`), `kube`,
`gcp`, `settings` and the leaves; only `cli` and `cleanup` import it.
"""
