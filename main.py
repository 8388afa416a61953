"""Cloud Function entry points (2nd gen, functions-framework): `compact` and `hpa_floor`.

Thin on purpose: everything happens in `compactor.http.handle` and
`compactor.hpa.http.handle`, and nothing is built here at import time.
"""

from __future__ import annotations

from typing import Any

import functions_framework

from compactor import http
from compactor.hpa import http as hpa_http


@functions_framework.http
def compact(request: Any) -> tuple[bytes, int, dict[str, str]]:
    return http.handle(request)


@functions_framework.http
def hpa_floor(request: Any) -> tuple[bytes, int, dict[str, str]]:
    return hpa_http.handle(request)
