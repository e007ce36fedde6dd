"""What the guest tests run on: the bindings componentize-py generates from the contract
(natively importable), a stand-in for the component's imports, test plugins, and requests.

Kept apart from the tests (no pytest here) so that a fresh interpreter can run it too:
``test_guest.test_calls_import_nothing`` checks, in one, that no call imports a module.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from wasmctrl import (
    Action,
    Context,
    Defaulter,
    Denied,
    Error,
    Gone,
    Manifest,
    Mapping,
    ObjectRef,
    Operation,
    Outcome,
    Predicate,
    Reconcile,
    Reconciler,
    Statement,
    Validator,
)

WIT = Path(__file__).resolve().parents[2] / "wit"


def componentize_py() -> str | None:
    """componentize-py beside this interpreter (a venv's), or on PATH."""
    beside = Path(sys.executable).parent / "componentize-py"
    return str(beside) if beside.exists() else shutil.which("componentize-py")


def generate_bindings(tool: str, out: Path) -> None:
    """The contract's Python bindings, as componentize-py generates them for a build."""
    subprocess.run([tool, "-d", str(WIT), "-w", "plugin-with-webhooks", "bindings", str(out)], check=True)


def load_bindings(out: Path) -> SimpleNamespace:
    """The generated binding modules in ``out``, imported."""
    sys.path.insert(0, str(out))
    from componentize_py_types import Err
    from wit_world.exports import webhooks
    from wit_world.imports import cache, log, sql, types

    return SimpleNamespace(types=types, webhooks=webhooks, log=log, cache=cache, sql=sql, Err=Err, path=out)


class Host:
    """Stands in for the component's imports: records logs, answers reads from a dict."""

    def __init__(self, b: SimpleNamespace, patch: Callable[[object, str, object], None] = setattr) -> None:
        self.logs: list[tuple[Any, str, list[tuple[str, str]]]] = []
        self.objects: dict[tuple[str, str, str], str] = {}
        self.b = b
        patch(b.log, "log", lambda level, message, fields: self.logs.append((level, message, fields)))
        patch(b.cache, "get", self.get)
        patch(b.cache, "list", lambda kind, ns, labels: [])
        patch(b.cache, "children", lambda kind, ns, uid: [])
        patch(b.sql, "execute", self.execute)

    def get(self, kind: Any, namespace: str, name: str) -> str | None:
        if namespace == "forbidden":
            raise self.b.Err("get v1/ConfigMap forbidden/x refused: outside")
        return self.objects.get((kind.kind, namespace, name))

    def execute(self, database: str, statements: list[Any]) -> list[Any]:
        if database == "down":
            raise self.b.Err(self.b.sql.SqlError("no connection", None, True))
        s = statements[0]
        return [self.b.sql.Rows(["q", "p"], [[self.b.sql.Value_Text(s.query), s.params[0]]], 1)]


class Plain(Reconciler):
    """No webhooks; reconcile does what the object's `do` annotation says."""

    def manifest(self, settings: Any) -> Manifest:
        return (
            Manifest.for_kind("example.com/v1", "Thing", "plain")
            .with_version("1.2.3")
            .namespaces("a", "b")
            .labels("tier=web")
            .predicate(Predicate.GENERATION_CHANGED)
            .owns_kind("v1", "ConfigMap")
            .reads_kind("v1", "Secret", namespaces=["shared"], labels="x=y", trigger=Mapping.label("owner"))
            .writes_kind("apps/v1", "Deployment")
            .capability("sql:db")
        )

    def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
        if isinstance(event, Gone):
            return Outcome.done().requeue_after(2)
        do = event.object["metadata"].get("annotations", {}).get("do", "")
        match do:
            case "raise":
                return {}["missing"]
            case "retry":
                raise Error.retryable("not yet")
            case "read":
                found = ctx.cache.get("v1", "ConfigMap", ctx.namespace, "c")
                return Outcome.of(Action.update_status({"found": found}))
            case "read-forbidden":
                ctx.cache.get("v1", "ConfigMap", "forbidden", "x")
            case "sql":
                rows = ctx.sql(ctx.name).execute(Statement("SELECT $1").bind(7))
                return Outcome.of(Action.update_status({"rows": rows.rows}))
        previous = [(r.index, r.status.value, r.failure.code if r.failure else None) for r in ctx.previous]
        return (
            Outcome.of(Action.update_status({"now": ctx.now_rfc3339(), "previous": previous}))
            .push_best_effort(Action.warning("Odd", "note"))
            .push(Action.delete(ObjectRef("apps/v1", "Deployment", "", "d")))
        )


def thing(do: str = "", **meta: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "metadata": {"name": "t", "namespace": "a", "annotations": {"do": do}, **meta},
        }
    )


def request(b: SimpleNamespace, obj: str | None, settings: str = "{}", previous: list[Any] | None = None) -> Any:
    return b.types.Request(
        "a", "t", obj, False, settings, b.types.Timestamp(1_764_000_000, 999_000_000), previous or []
    )


class Sized(Plain, Validator, Defaulter):
    """Refuses a size over 3; defaults the size to 1."""

    def manifest(self, settings: Any) -> Manifest:
        return super().manifest(settings).validating(Operation.CREATE, Operation.UPDATE).defaulting()

    def validate_create(self, obj: dict[str, Any], admission: Any) -> list[str]:
        if obj["spec"]["size"] > 3:
            raise Denied(f"size {obj['spec']['size']} is over 3", 422, ["think small"])
        return [f"{admission.user.username} asked"]

    def default(self, obj: dict[str, Any], admission: Any) -> None:
        obj["spec"].setdefault("size", 1)


def admission(b: SimpleNamespace, operation: str, obj: str | None, old: str | None = None) -> Any:
    w, t = b.webhooks, b.types
    return w.AdmissionRequest(
        "uid",
        t.Gvk("example.com", "v1", "Thing"),
        "things",
        "",
        "t",
        "a",
        w.Operation[operation.upper()],
        w.UserInfo("alice", "", []),
        obj,
        old,
        False,
        "{}",
        t.Timestamp(0, 0),
    )


def sized(size: int | None) -> str:
    spec = {} if size is None else {"size": size}
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})


def exercise(b: SimpleNamespace, reconciler: type, webhooks: type) -> None:
    """Every path through the exports: reconciles that succeed, fail, read and run SQL, one of
    an object that does not parse, the manifest, and each webhook's answers and failures."""
    for do in ["", "raise", "retry", "read", "read-forbidden", "sql"]:
        with contextlib.suppress(b.Err):
            reconciler().reconcile(request(b, thing(do, name="db")))
    for obj in ["{not json", None]:
        with contextlib.suppress(b.Err):
            reconciler().reconcile(request(b, obj))
    reconciler().manifest("{}")
    webhooks().declare("{}")
    webhooks().validate(admission(b, "create", sized(5)))
    webhooks().validate(admission(b, "create", sized(1)))
    webhooks().mutate(admission(b, "create", sized(None)))
    with contextlib.suppress(b.Err):
        webhooks().validate(admission(b, "create", json.dumps({"spec": {}})))
    with contextlib.suppress(b.Err):
        webhooks().convert("{}", "example.com/v2", [])


def new_imports_in_a_fresh_interpreter(bindings: Path) -> list[str]:
    """Run as ``python standin.py <bindings>``: the modules the exports import during calls."""
    b = load_bindings(bindings)
    Host(b)
    from wasmctrl.guest import export

    reconciler, webhooks = export(Sized)
    before = set(sys.modules)
    exercise(b, reconciler, webhooks)
    return sorted(set(sys.modules) - before)


if __name__ == "__main__":
    print(json.dumps(new_imports_in_a_fresh_interpreter(Path(sys.argv[1]))))
