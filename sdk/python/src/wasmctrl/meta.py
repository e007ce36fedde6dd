"""Typed reads of an object's metadata, for objects kept as plain ``dict``\\ s.

Each helper tolerates what the API server may leave out (no labels, no namespace on a
cluster-scoped object) and returns the empty value, so a reconcile reads
``meta.labels(obj).get("app")`` instead of chaining ``.get(..., {})``.
"""

from typing import Any

from .manifest import Gvk


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def name(obj: dict[str, Any]) -> str:
    """The object's name, or its ``generateName`` when it has none yet (kube's ``name_any``)."""
    meta = _metadata(obj)
    return str(meta.get("name") or meta.get("generateName") or "")


def namespace(obj: dict[str, Any]) -> str:
    """The object's namespace; empty for a cluster-scoped object."""
    return str(_metadata(obj).get("namespace") or "")


def uid(obj: dict[str, Any]) -> str:
    """The object's uid; empty before the API server stored it."""
    return str(_metadata(obj).get("uid") or "")


def generation(obj: dict[str, Any]) -> int:
    """``metadata.generation``: 0 when unset (an object the API server never stored)."""
    value = _metadata(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def labels(obj: dict[str, Any]) -> dict[str, str]:
    """``metadata.labels``; empty when there are none."""
    return dict(_metadata(obj).get("labels") or {})


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    """``metadata.annotations``; empty when there are none."""
    return dict(_metadata(obj).get("annotations") or {})


def finalizers(obj: dict[str, Any]) -> list[str]:
    """``metadata.finalizers``; empty when there are none."""
    return list(_metadata(obj).get("finalizers") or [])


def deleting(obj: dict[str, Any]) -> bool:
    """Whether the object is being deleted (it has a ``deletionTimestamp``; finalizers hold
    it)."""
    return _metadata(obj).get("deletionTimestamp") is not None


def gvk(obj: dict[str, Any]) -> Gvk:
    """The object's group, version and kind, from its ``apiVersion`` and ``kind``."""
    return Gvk.from_api_version(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


def child_meta(owner: dict[str, Any], child_name: str) -> dict[str, Any]:
    """Metadata for a child of ``owner``: ``child_name``, in the owner's namespace (none for a
    cluster-scoped owner). The host adds the controller owner reference when it applies an
    owned kind."""
    meta: dict[str, Any] = {"name": child_name}
    if namespace(owner):
        meta["namespace"] = namespace(owner)
    return meta
