"""Cloud Function entry point (2nd gen, functions-framework): `compact`.

Thin on purpose: everything happens in `compactor.http.handle`, and nothing
is built here at import time.
"""

from __future__ import annotations

from typing import Any

import functions_framework

from compactor import http


@functions_framework.http
def compact(request: Any) -> tuple[bytes, int, dict[str, str]]:
    return http.handle(request)
