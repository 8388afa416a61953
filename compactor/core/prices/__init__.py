"""What nodes cost: machine types and the allocatable GKE leaves on them (`machines`), the dated built-in price
table (`price_table`) and the price file format (`pricing`), and each node's price per hour (`costs`).

Money and shapes only: nothing here decides a drain or a replacement, and nothing here imports a planner stage
(an import-linter contract in pyproject.toml keeps the room below the planner and the replacement room).
Pure like the rest of `compactor.core`: the caller hands in every table, file and date.
"""
