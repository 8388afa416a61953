"""`python -m compactor`."""

import os
import sys

from compactor.cli import main

code = main()
# A planned 150,000-pod cluster is millions of small objects; freeing them one by one at
# interpreter exit takes seconds and serves no one. Flush what was written and leave.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
