"""The pure planner: cluster snapshot + configuration + time in, plan out.

Nothing in this package performs I/O, reads a clock or logs, and nothing
imports kubernetes, google, flask or functions_framework (a test enforces it).
Of node-compactor's own rooms it may import only `compactor.settings` (the
configuration it is handed) and the leaves.
"""
