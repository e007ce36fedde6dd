"""Kubernetes' rules for names and for the metadata of an object sent whole, worded as
kube-apiserver words them: the part of ``wasmctrl-core``'s ``validation.rs`` the host applies to
a plugin's applied objects and finalizers before sending them.

A port rule for rule and message for message, so a plugin whose pytest passes is not refused
by the host (nor by the API server behind it) for a name or a label.
"""

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from .selector import quote

#: The most bytes all of an object's annotations (keys and values) may take.
ANNOTATIONS_MAX_BYTES = 256 * 1024
#: The most characters an Event's ``reason`` and ``action`` may have.
EVENT_REASON_MAX = 128

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


@dataclass(frozen=True)
class FieldError:
    """One refused field, as apimachinery's ``field.Error`` prints it."""

    #: ``Invalid value``, ``Required value``, ``Forbidden``, ``Too long``.
    type: str
    #: The field's path (``metadata.labels``).
    field: str
    #: The refused value as Go prints it, for the types that print one.
    value: str | None
    detail: str

    @classmethod
    def invalid(cls, field: str, value: str, detail: str) -> Self:
        return cls("Invalid value", field, quote(value), detail)

    @classmethod
    def invalid_printed(cls, field: str, value: str, detail: str) -> Self:
        return cls("Invalid value", field, value, detail)

    @classmethod
    def required(cls, field: str, detail: str) -> Self:
        return cls("Required value", field, None, detail)

    @classmethod
    def too_long(cls, field: str, limit: int) -> Self:
        return cls("Too long", field, None, f"may not be more than {limit} bytes")

    def body(self) -> str:
        """The message without the field."""
        parts = [self.type] + ([self.value] if self.value is not None else []) + ([self.detail] if self.detail else [])
        return ": ".join(parts)

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _bytes(text: str) -> int:
    return len(text.encode())


def _regex_error(msg: str, regex: str, examples: list[str]) -> str:
    """apimachinery's ``RegexError``, its doubled spaces included."""
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{regex}')"


def _max_len_error(limit: int) -> str:
    return f"must be no more than {limit} characters"


def _is_label_chars(text: str) -> bool:
    """``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, without a length limit."""
    alnum = set("abcdefghijklmnopqrstuvwxyz0123456789")
    return bool(text) and text[0] in alnum and text[-1] in alnum and set(text) <= alnum | {"-"}


def _is_subdomain_chars(text: str) -> bool:
    return all(_is_label_chars(part) for part in text.split("."))


def _is_qualified_chars(text: str) -> bool:
    """``([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]``."""

    def alnum(c: str) -> bool:
        return c.isascii() and c.isalnum()

    return bool(text) and alnum(text[0]) and alnum(text[-1]) and all(alnum(c) or c in "-_." for c in text)


def dns1123_label(value: str) -> list[str]:
    """An RFC 1123 label (namespace names): apimachinery's ``IsDNS1123Label``."""
    errors = [_max_len_error(63)] if _bytes(value) > 63 else []
    if not _is_label_chars(value):
        if _is_subdomain_chars(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                    _DNS1123_LABEL_FMT,
                    ["my-name", "123-abc"],
                )
            )
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    """An RFC 1123 subdomain (most object names): apimachinery's ``IsDNS1123Subdomain``."""
    errors = [_max_len_error(253)] if _bytes(value) > 253 else []
    if not _is_subdomain_chars(value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                ["example.com"],
            )
        )
    return errors


def dns1035_label(value: str) -> list[str]:
    """An RFC 1035 label (Service names): apimachinery's ``IsDNS1035Label``."""
    errors = [_max_len_error(63)] if _bytes(value) > 63 else []
    if not (_is_label_chars(value) and value[0].islower() and value[0].isascii()):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL_FMT,
                ["my-name", "abc-123"],
            )
        )
    return errors


def qualified_name(value: str) -> list[str]:
    """``[prefix/]name`` (label and annotation keys, finalizers): apimachinery's
    ``IsQualifiedName``."""
    regex = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, ["MyName", "my.name", "123-abc"])
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [f"a qualified name {regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {m}" for m in dns1123_subdomain(prefix))
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _bytes(name) > 63:
        errors.append(f"name part {_max_len_error(63)}")
    if not _is_qualified_chars(name):
        errors.append(f"name part {regex}")
    return errors


def label_value(value: str) -> list[str]:
    """A label value (empty, or a qualified name's name part): ``IsValidLabelValue``."""
    errors = [_max_len_error(63)] if _bytes(value) > 63 else []
    if value and not _is_qualified_chars(value):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
                ["MyValue", "my_value", "12345"],
            )
        )
    return errors


def _path_segment(name: str) -> list[str]:
    """apimachinery's ``ValidatePathSegmentName``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


class NameRule(enum.Enum):
    """Which grammar a kind's object names follow (kube's ``ValidateNameFunc`` per strategy)."""

    SUBDOMAIN = "subdomain"
    LABEL = "label"
    DNS1035_LABEL = "dns1035-label"
    PATH_SEGMENT = "path-segment"

    @classmethod
    def of(cls, group: str, kind: str) -> Self:
        """The rule kube-apiserver applies to names of ``kind`` in ``group``."""
        if (group, kind) == ("", "Namespace"):
            return cls.LABEL
        if (group, kind) == ("", "Service"):
            return cls.DNS1035_LABEL
        if (group, kind) == ("", "Event") or group == "rbac.authorization.k8s.io":
            return cls.PATH_SEGMENT
        return cls.SUBDOMAIN

    def check(self, name: str) -> list[str]:
        """What is wrong with ``name``."""
        checks: dict[NameRule, Callable[[str], list[str]]] = {
            NameRule.SUBDOMAIN: dns1123_subdomain,
            NameRule.LABEL: dns1123_label,
            NameRule.DNS1035_LABEL: dns1035_label,
            NameRule.PATH_SEGMENT: _path_segment,
        }
        return checks[self](name)


def _string_map(meta: dict[str, Any], key: str) -> list[tuple[str, str]]:
    found = meta.get(key)
    if not isinstance(found, dict):
        return []
    return [(k, v if isinstance(v, str) else "") for k, v in found.items()]


def _str(data: Any, key: str) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def sent_meta(meta: Any, rule: NameRule) -> list[FieldError]:
    """The metadata of an object sent whole (server-side apply, a plugin's child) before the
    server settles its namespace: name, labels, annotations, owner references, finalizers."""
    meta = meta if isinstance(meta, dict) else {}
    name = _str(meta, "name")
    if not name:
        errors = [FieldError.required("metadata.name", "name or generateName is required")]
    else:
        errors = [FieldError.invalid("metadata.name", name, m) for m in rule.check(name)]
    return errors + labels(meta) + annotations(meta) + owner_references(meta) + finalizers(meta)


def labels(meta: dict[str, Any]) -> list[FieldError]:
    """``metadata.labels``: qualified-name keys, label values."""
    errors = []
    for key, value in _string_map(meta, "labels"):
        errors += [FieldError.invalid("metadata.labels", key, m) for m in qualified_name(key)]
        errors += [FieldError.invalid("metadata.labels", value, m) for m in label_value(value)]
    return errors


def annotations(meta: dict[str, Any]) -> list[FieldError]:
    """``metadata.annotations``: qualified-name keys (case aside) and at most 256 KiB in all."""
    found = _string_map(meta, "annotations")
    errors = []
    for key, _ in found:
        errors += [FieldError.invalid("metadata.annotations", key, m) for m in qualified_name(key.lower())]
    if sum(_bytes(k) + _bytes(v) for k, v in found) > ANNOTATIONS_MAX_BYTES:
        errors.append(FieldError.too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES))
    return errors


def _printed(value: Any) -> str:
    """A JSON value as serde_json prints it (keys sorted, compact)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def owner_references(meta: dict[str, Any]) -> list[FieldError]:
    """``metadata.ownerReferences``: apiVersion (with a version), kind, name and uid required,
    no core Event as owner, at most one controller."""
    field = "metadata.ownerReferences"
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return []
    errors: list[FieldError] = []
    controller: str | None = None
    for ref in refs:
        api_version, kind = _str(ref, "apiVersion"), _str(ref, "kind")
        parts = api_version.split("/")
        version = parts[-1] if len(parts) <= 2 else ""
        group = parts[0] if len(parts) == 2 else ""
        required = [
            ("apiVersion", version, "version"),
            ("kind", kind, "kind"),
            ("name", _str(ref, "name"), "name"),
            ("uid", _str(ref, "uid"), "uid"),
        ]
        for key, value, what in required:
            if not value:
                shown = api_version if key == "apiVersion" else value
                errors.append(FieldError.invalid(f"{field}.{key}", shown, f"{what} must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            errors.append(
                FieldError.invalid_printed(field, _printed(ref), "/v1, Kind=Event is disallowed from being an owner")
            )
        if isinstance(ref, dict) and ref.get("controller") is True:
            this = f"{kind}/{_str(ref, 'name')}"
            if controller is None:
                controller = this
            else:
                detail = f'Only one reference can have Controller set to true. Found "true" in references for {controller} and {this}'
                errors.append(FieldError.invalid_printed(field, _printed(refs), detail))
    return errors


def finalizers(meta: dict[str, Any]) -> list[FieldError]:
    """``metadata.finalizers``: qualified names, not both ``orphan`` and
    ``foregroundDeletion``."""
    found = meta.get("finalizers")
    if not isinstance(found, list):
        return []
    names = [n for n in found if isinstance(n, str)]
    errors = [FieldError.invalid("metadata.finalizers", n, m) for n in names for m in qualified_name(n)]
    if "orphan" in names and "foregroundDeletion" in names:
        printed = "[]string{" + ", ".join(quote(n) for n in names) + "}"
        errors.append(
            FieldError.invalid_printed(
                "metadata.finalizers", printed, "finalizer orphan and foregroundDeletion cannot be both set"
            )
        )
    return errors
