"""The operator's settings for a plugin (the config beside the ``.wasm``), parsed into the type
the plugin names as ``Settings``: a dataclass, :class:`NoSettings`, or ``dict`` for free-form
settings.

The SDK parses them before every call (each call runs in a fresh instance), so a plugin sees
typed settings everywhere and settings that do not fit are refused once, at load, with a
message naming the field.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from . import codec
from .error import SettingsError


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """The settings of a plugin that takes none. An object's fields are ignored (an operator
    may configure settings a later version of the plugin reads); a value that is not an object
    is refused, as the Rust SDK's ``NoSettings`` does."""


def parse(cls: type[Any], text: str) -> Any:
    """The settings JSON ``text`` as ``cls``. None given (empty, ``null``) is ``cls``'s
    defaults; a dataclass refuses unknown keys and values of the wrong type.

    Raises :class:`SettingsError` with the message the host prints.
    """
    text = text.strip()
    data: Any = {}
    if text and text != "null":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SettingsError(f"invalid settings: {e}") from None
    if cls is dict:
        if not isinstance(data, dict):
            raise SettingsError(f"invalid settings: expected an object, got {codec.describe(data)}")
        return data
    if cls is NoSettings:
        if not isinstance(data, dict):
            raise SettingsError(f"invalid settings: expected an object, got {codec.describe(data)}")
        return NoSettings()
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"Settings must be a dataclass, NoSettings or dict, not {cls!r}")
    try:
        return codec.decode(cls, data, unknown=codec.Unknown.REJECT)
    except codec.DecodeError as e:
        raise SettingsError(f"invalid settings: {e}") from None
