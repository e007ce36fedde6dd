"""JSON as the host and the Rust SDK write it: compact, UTF-8 kept as is, no NaN.

One place for it so that every action, status and log field the SDK sends reads byte for byte
like serde_json's output (the host hashes applied objects to skip identical writes, and
``wasmctrl test`` compares Python and Rust plugins).
"""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """``value`` as compact JSON. NaN and infinities are refused (``ValueError``): JSON has no
    such numbers and the API server would refuse them anyway."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    """Parses JSON text."""
    return json.loads(text)
