//! Where the sandbox's fixed cost goes. Each step adds one thing to the one before, from
//! wasmtime's own floor on the host's engine to the host's full path, all on one thread with
//! rounds interleaved: a core module; a component of one core instance; a component shaped as
//! `wit-component` shapes a plugin that imports functions (its module, a shim instance holding
//! a table of the lowered imports, a fixup instance filling it); the plugin's own component
//! instantiated and dropped (its imports as traps, never called); the same and a call of its
//! `reconcile` through wasmtime's API; the host's `Plugin::reconcile`. Every step is a fresh
//! store and instance, as the host's are, and the floors write one word at the top of a Rust
//! guest's 1 MiB stack, as a call's first frame does.

use std::sync::Arc;

use wasmctrl::plugin::wit;
use wasmtime::component::{Component, ComponentExportIndex, Linker, TypedFunc};
use wasmtime::{Engine, Store};

use super::{ROUNDS, Spread, rate, spread};

type Op = Arc<dyn Fn() + Send + Sync>;

const MODULE: &str = r#"(module
    (memory (export "memory") 17)
    (func (export "run") (i32.store (i32.const 1048560) (i32.const 1))))"#;

const ONE_INSTANCE: &str = r#"(component
    (core module $m
        (memory (export "memory") 17)
        (func (export "run") (i32.store (i32.const 1048560) (i32.const 1))))
    (core instance $i (instantiate $m))
    (func (export "run") (canon lift (core func $i "run"))))"#;

/// The instances and tables `wit-component` makes for a module with lowered imports.
const SHAPED: &str = r#"(component
    (core module $shim
        (table (export "$imports") 2 2 funcref)
        (func (export "0") (param i32)) (func (export "1") (param i32)))
    (core module $m
        (import "env" "f0" (func (param i32)))
        (import "env" "f1" (func (param i32)))
        (memory (export "memory") 17)
        (table 71 funcref)
        (func (export "run") (i32.store (i32.const 1048560) (i32.const 1))))
    (core module $fixup
        (import "" "$imports" (table 2 2 funcref))
        (import "" "0" (func (param i32))))
    (core instance $shim (instantiate $shim))
    (core instance $env (export "f0" (func $shim "0")) (export "f1" (func $shim "1")))
    (core instance $m (instantiate $m (with "env" (instance $env))))
    (core instance $fix (export "$imports" (table $shim "$imports")) (export "0" (func $shim "0")))
    (core instance (instantiate $fixup (with "" (instance $fix))))
    (func (export "run") (canon lift (core func $m "run"))))"#;

fn store(engine: &Engine) -> Store<()> {
    let mut store = Store::new(engine, ());
    // The engine interrupts by epoch; these calls never run long enough to need it.
    store.set_epoch_deadline(1 << 40);
    store
}

fn module_floor(engine: &Engine) -> Op {
    let module = wasmtime::Module::new(engine, MODULE).expect("floor module");
    let pre = wasmtime::Linker::<()>::new(engine)
        .instantiate_pre(&module)
        .expect("floor module links");
    let engine = engine.clone();
    Arc::new(move || {
        let mut store = store(&engine);
        let instance = pre.instantiate(&mut store).expect("instantiate");
        let run = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .expect("typed run");
        run.call(&mut store, ()).expect("call");
    })
}

fn component_floor(engine: &Engine, wat: &str) -> Op {
    let component = Component::new(engine, wat).expect("floor component");
    let run = component.get_export_index(None, "run").expect("run export");
    let pre = Linker::<()>::new(engine)
        .instantiate_pre(&component)
        .expect("floor component links");
    let engine = engine.clone();
    Arc::new(move || {
        let mut store = store(&engine);
        let instance = pre.instantiate(&mut store).expect("instantiate");
        let f = instance
            .get_typed_func::<(), ()>(&mut store, &run)
            .expect("typed run");
        f.call(&mut store, ()).expect("call");
    })
}

/// The plugin's component through wasmtime alone: instantiate and drop, or also call its
/// `reconcile` with a request without an object.
fn plugin_steps(engine: &Engine, wasm: &[u8]) -> (Op, Op) {
    let component = Component::new(engine, wasm).expect("plugin component");
    let mut linker = Linker::<()>::new(engine);
    linker
        .define_unknown_imports_as_traps(&component)
        .expect("trap imports");
    let pre = linker.instantiate_pre(&component).expect("plugin links");
    let interface = format!("wasmctrl:plugin/reconciler@{}", wasmctrl::runtime::CONTRACT);
    let iface = component
        .get_export_index(None, &interface)
        .expect("reconciler interface");
    let reconcile: ComponentExportIndex = component
        .get_export_index(Some(&iface), "reconcile")
        .expect("reconcile export");
    let instantiate: Op = {
        let (engine, pre) = (engine.clone(), pre.clone());
        Arc::new(move || {
            let mut store = store(&engine);
            std::hint::black_box(pre.instantiate(&mut store).expect("instantiate"));
        })
    };
    let call: Op = {
        let engine = engine.clone();
        Arc::new(move || {
            let mut store = store(&engine);
            let instance = pre.instantiate(&mut store).expect("instantiate");
            let f: TypedFunc<(&wit::Request,), (Result<wit::Outcome, wit::Error>,)> = instance
                .get_typed_func(&mut store, reconcile)
                .expect("typed reconcile");
            let mut request = super::request("");
            request.object = None;
            let (outcome,) = f.call(&mut store, (&request,)).expect("call");
            std::hint::black_box(outcome.expect("reconciled"));
        })
    };
    (instantiate, call)
}

/// Measures each step and the host's `empty` call; prints them and returns the host's spread.
pub fn run(engine: &Engine, wasm: &[u8], empty: Op) -> Spread {
    let (instantiate, call) = plugin_steps(engine, wasm);
    let steps: [(&str, Op); 6] = [
        ("wasmtime floor: core module", module_floor(engine)),
        (
            "wasmtime floor: component, one core instance",
            component_floor(engine, ONE_INSTANCE),
        ),
        (
            "wasmtime floor: component shaped as wit-component's (module, shim, fixup)",
            component_floor(engine, SHAPED),
        ),
        ("the plugin's component: instantiate, no call", instantiate),
        ("the plugin's component: instantiate + reconcile", call),
        ("the host: Plugin::reconcile (+ limits, checks)", empty),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); steps.len()];
    for _ in 0..ROUNDS {
        for ((_, op), r) in steps.iter().zip(&mut rates) {
            r.push(rate(1, op.clone()));
        }
    }
    println!("where the fixed cost goes (fresh store and instance each time, 1 thread):");
    let mut previous: Option<f64> = None;
    let mut host = None;
    for ((label, _), r) in steps.iter().zip(rates) {
        let s = spread(r);
        let us = 1e6 / s.median;
        let added = previous.map_or(String::new(), |p| format!("  ({:+.1})", us - p));
        println!(
            "  {label:<76} {us:>5.1} µs ({:.1}..{:.1}){added}",
            1e6 / s.max,
            1e6 / s.min
        );
        previous = Some(us);
        host = Some(s);
    }
    host.expect("the host's step")
}
