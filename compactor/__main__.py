"""`python -m compactor`: the same command as `node-compactor` (`cli.console`)."""

from compactor.cli import console

console()
