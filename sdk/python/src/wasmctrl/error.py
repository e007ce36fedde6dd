"""The errors a plugin reports: :class:`Error` (a failed reconcile, retryable or terminal) and
:class:`SettingsError` (operator settings the plugin refuses).

Below every other module of the SDK, which all raise them.
"""

from __future__ import annotations


class Error(Exception):
    """A failed reconcile, as the contract's ``error`` record says it.

    Retryable errors back off exponentially; terminal ones are reported and not retried until
    the object changes. Build one with :meth:`retryable` or :meth:`terminal`, then raise it or
    return it from ``reconcile``: the SDK treats both alike, so a helper can hand one back
    without unwinding.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.is_retryable = retryable

    @classmethod
    def retryable(cls, message: object) -> Error:
        """A failure worth retrying with backoff (a dependency is not ready, a read failed)."""
        return cls(str(message), retryable=True)

    @classmethod
    def terminal(cls, message: object) -> Error:
        """A failure retrying cannot fix (an invalid spec): reported, not retried until the
        object changes."""
        return cls(str(message), retryable=False)

    def __str__(self) -> str:
        kind = "retryable" if self.is_retryable else "terminal"
        return f"{self.message} ({kind})"

    def __repr__(self) -> str:
        constructor = "retryable" if self.is_retryable else "terminal"
        return f"Error.{constructor}({self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Error):
            return NotImplemented
        return (self.message, self.is_retryable) == (other.message, other.is_retryable)

    def __hash__(self) -> int:
        return hash((self.message, self.is_retryable))


class SettingsError(ValueError):
    """Operator settings the plugin refuses: the host refuses to load it and prints the
    message. The SDK raises it for settings that do not decode; a plugin's ``manifest`` may
    raise it (or any ``ValueError``) for settings it does not accept."""
