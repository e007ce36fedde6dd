"""A Python plugin that misbehaves on request, to prove the sandbox contains a CPython guest as
it contains a Rust one (the Rust plugin is ``tests/plugins/hostile``).

It watches ConfigMaps in namespace ``team-a``. Its settings choose its manifest name
(``{"name": ...}``, default ``hostile-py-<mode>``) and what it does with every reconcile
(``{"mode": ...}``):

- ``loop``: spins forever (the host's deadline must end the call);
- ``alloc``: allocates without bound, a megabyte at a time (the memory cap must end it);
- ``patch-other``: returns a merge patch of ConfigMap ``other/target``, outside the namespace
  it declares (the host must refuse the action);
- ``get-other``: reads ConfigMap ``other/target`` through the cache and reports what it got, in
  a log line and a Warning Event (the host must refuse the read, and fail the reconcile even
  though the plugin carries on);
- ``ok`` (the default): nothing to do.
"""

from __future__ import annotations

from typing import Any

from wasmctrl import Action, Context, Error, Gone, Manifest, ObjectRef, Outcome, Reconcile, Reconciler, log

#: Where the plugin is declared to act, and the namespace it reaches into.
OWN, OTHER = "team-a", "other"
MODES = ("loop", "alloc", "patch-other", "get-other", "ok")


def mode(settings: dict[str, Any]) -> str:
    """The misbehaviour asked for; ``ok`` when none."""
    return str(settings.get("mode", "ok"))


def spin() -> None:
    """Never returns: only the host's deadline ends the call."""
    while True:
        pass


def hoard() -> None:
    """Never returns: grows a list of megabyte objects until the memory cap ends the call."""
    held: list[bytes] = []
    while True:
        held.append(bytes(1 << 20))


def get_other(ctx: Context[dict[str, Any]]) -> Outcome:
    """Reads across the namespace boundary and reports what came back, carrying on as a careless
    plugin would."""
    try:
        found = ctx.cache.get("v1", "ConfigMap", OTHER, "target")
        got = "absent" if found is None else f"found {found.get('data', {})}"
    except Error as e:
        got = f"refused: {e.message}"
    log.warn("read across namespaces", namespace=OTHER, got=got)
    return Outcome.of(Action.warning("ReadOther", f"{OTHER}/target: {got}"))


def patch_other() -> Outcome:
    """A merge patch of a ConfigMap outside the declared namespace."""
    target = ObjectRef("v1", "ConfigMap", OTHER, "target")
    return Outcome.of(Action.merge_patch(target, {"data": {"patchedBy": "hostile-py"}}))


class Hostile(Reconciler[dict[str, Any]]):
    """The plugin: free-form settings, a minimal manifest, a mode per reconcile."""

    Settings = dict

    def manifest(self, settings: dict[str, Any]) -> Manifest:
        chosen = mode(settings)
        if chosen not in MODES:
            raise ValueError(f"unknown mode {chosen!r} (one of {', '.join(MODES)})")
        name = str(settings.get("name") or f"hostile-py-{chosen}")
        return Manifest.for_kind("v1", "ConfigMap", name).namespaces(OWN)

    def reconcile(self, event: Reconcile, ctx: Context[dict[str, Any]]) -> Outcome:
        if isinstance(event, Gone):
            return Outcome.done()
        match mode(ctx.settings):
            case "loop":
                spin()
            case "alloc":
                hoard()
            case "patch-other":
                return patch_other()
            case "get-other":
                return get_other(ctx)
        return Outcome.done()
