"""Testing plugins natively: :class:`Harness`, a stand-in host that makes the host's own
checks, so a plugin that passes its tests under pytest is not refused by the host.

The checks are ports of ``wasmctrl-core`` (the crate the host and the Rust SDK share):
:mod:`.scope` (what a manifest grants), :mod:`.checks` (each action before it is sent),
:mod:`.selector` (label selectors) and :mod:`.validation` (names and metadata as the API
server checks them).
"""

from .harness import Harness, LogLine, SqlStandIn, WebhookError

__all__ = ["Harness", "LogLine", "SqlStandIn", "WebhookError"]
