"""What a run is told: the configuration (`config`, read strictly by `strictjson`), cron schedules (`cron`),
JSON input files (`jsonfiles`) and the command line's shared arguments (`arguments`).

The lowest room but the leaves: modules here import only each other and
`compactor.errors`, never the planner nor anything that does I/O beyond
reading the file or text they are handed.
"""
