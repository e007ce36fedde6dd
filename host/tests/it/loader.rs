//! The plugin directory loader: the initial load, hot reload of new, changed, broken and removed
//! files, ConfigMap-style `..data` symlink swaps, and a burst of writes ending on the last good
//! version.

use crate::common;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::plugins::loader::{Change, Loader, Options, PluginConfig};
use wasmctrl::runtime::{Config, Plugin, Runtime};
use wasmctrl::view::EmptyView;

/// Generous: a debounce plus a Cranelift compile on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(20);

fn options() -> Options {
    Options {
        debounce: Duration::from_millis(100),
        // Tests prove that events alone drive reloads.
        resync: None,
        ..Options::default()
    }
}

/// Replaces a file atomically (write a dotfile, rename it over), so the loader never sees it
/// half-written and the tests can expect exact sequences. In-place writes are tested on purpose
/// in the truncation and burst tests.
fn put(path: &Path, contents: impl AsRef<[u8]>) {
    let file_name = path.file_name().expect("a file path").to_string_lossy();
    let tmp = path.with_file_name(format!(".{file_name}.tmp"));
    fs::write(&tmp, contents).expect("write the temporary file");
    fs::rename(&tmp, path).expect("rename it over the target");
}

async fn start(dir: &Path) -> (Loader, mpsc::Receiver<Change>) {
    let runtime = Runtime::new(Config::default()).expect("runtime");
    Loader::start(dir.to_path_buf(), runtime, options())
        .await
        .expect("loader starts")
}

async fn next(rx: &mut mpsc::Receiver<Change>) -> Change {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a change within the timeout")
        .expect("the loader is running")
}

fn name(plugin: &Plugin) -> &str {
    &plugin.manifest().name
}

fn added(change: Change) -> (Arc<Plugin>, PluginConfig) {
    match change {
        Change::Added(plugin, config) => (plugin, config),
        other => panic!("expected Added, got {other:?}"),
    }
}

fn failed(change: Change) -> (std::path::PathBuf, String) {
    match change {
        Change::Failed { path, error } => (path, error),
        other => panic!("expected Failed, got {other:?}"),
    }
}

fn replaced(change: Change) -> (Arc<Plugin>, Arc<Plugin>, PluginConfig) {
    match change {
        Change::Replaced { old, new, config } => (old, new, config),
        other => panic!("expected Replaced, got {other:?}"),
    }
}

fn removed(change: Change) -> Arc<Plugin> {
    match change {
        Change::Removed(plugin) => plugin,
        other => panic!("expected Removed, got {other:?}"),
    }
}

fn names(loader: &Loader) -> Vec<String> {
    (loader.current().iter())
        .map(|(p, _)| name(p).to_string())
        .collect()
}

fn settings(loader: &Loader, plugin: &str) -> Value {
    (loader.current().into_iter())
        .find(|(p, _)| name(p) == plugin)
        .map(|(_, c)| c.settings)
        .unwrap_or_else(|| panic!("{plugin} is not served"))
}

/// Reconciles a VirtualMachine on a blocking thread, as the controller would.
async fn reconcile_vm(plugin: Arc<Plugin>) -> Vec<Intent> {
    let object = json!({"apiVersion": "cloudnative.tw/v1alpha1", "kind": "VirtualMachine",
        "metadata": {"namespace": "default", "name": "vm1", "uid": "u1", "generation": 1},
        "spec": {"resource": {"cpu": 1, "memory": "1Gi", "rootDisk": "10Gi"}}});
    let request = wit::Request {
        namespace: "default".into(),
        name: "vm1".into(),
        object: Some(object.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp::parse("2026-11-22T00:00:00Z").expect("RFC 3339"),
        previous: Vec::new(),
    };
    tokio::task::spawn_blocking(move || plugin.reconcile(request, Arc::new(EmptyView)))
        .await
        .expect("reconcile thread")
        .expect("reconcile succeeds")
        .intents
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_load_serves_each_plugin_with_its_config() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(
        common::plugin_path("virtualmachine"),
        dir.path().join("virtualmachine.wasm"),
    )
    .unwrap();
    fs::write(
        dir.path().join("virtualmachine.toml"),
        "concurrency = 3\n[settings]\ngreeting = \"hi\"\n",
    )
    .unwrap();
    // Ignored: not a plugin, a dotfile, a config without a plugin.
    fs::write(dir.path().join("README.md"), "hello").unwrap();
    fs::write(dir.path().join(".hidden.wasm"), "garbage").unwrap();
    fs::write(dir.path().join("orphan.toml"), "nonsense = true").unwrap();
    // Reported, but does not stop the others from loading.
    fs::write(dir.path().join("broken.wasm"), "not wasm").unwrap();

    let (loader, mut rx) = start(dir.path()).await;
    let (path, error) = failed(next(&mut rx).await);
    assert_eq!(path, dir.path().join("broken.wasm"));
    assert!(error.contains("broken.wasm"), "{error}");
    let (plugin, config) = added(next(&mut rx).await);
    assert_eq!(name(&plugin), "virtualmachine");
    assert_eq!(config.concurrency, Some(3));
    assert_eq!(config.settings, json!({"greeting": "hi"}));
    assert_eq!(plugin.settings(), r#"{"greeting":"hi"}"#);

    let current = loader.current();
    assert_eq!(current.len(), 1);
    assert!(Arc::ptr_eq(&current[0].0, &plugin));
    assert_eq!(current[0].1, config);
    assert!(rx.try_recv().is_err(), "nothing else was loaded");
}

/// New file -> Added; same file now declaring another name -> Added + Removed; garbage ->
/// Failed with the old version still serving and reconciling; good bytes back -> nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_published_and_a_broken_file_never_replaces_a_working_one() {
    let dir = tempfile::tempdir().unwrap();
    let vm_path = dir.path().join("virtualmachine.wasm");
    let vm_bytes = common::plugin_bytes("virtualmachine");
    fs::write(&vm_path, &vm_bytes).unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    let (vm, _) = added(next(&mut rx).await);

    let trivial_path = dir.path().join("trivial.wasm");
    put(&trivial_path, common::plugin_bytes("trivial"));
    let (trivial, _) = added(next(&mut rx).await);
    assert_eq!(name(&trivial), "trivial");
    assert_eq!(names(&loader), ["trivial", "virtualmachine"]);

    // Identity is the manifest name: the file now holds `hostile-ok`, so `trivial` is gone.
    put(&trivial_path, common::plugin_bytes("hostile"));
    let (hostile, _) = added(next(&mut rx).await);
    assert_eq!(name(&hostile), "hostile-ok");
    assert_eq!(name(&removed(next(&mut rx).await)), "trivial");
    assert_eq!(names(&loader), ["hostile-ok", "virtualmachine"]);

    put(&vm_path, b"\0asm garbage, not a component");
    let (path, error) = failed(next(&mut rx).await);
    assert_eq!(path, vm_path);
    assert!(error.contains("virtualmachine.wasm"), "{error}");
    let (serving, _) = (loader.current().into_iter())
        .find(|(p, _)| name(p) == "virtualmachine")
        .expect("the old version still serves");
    assert!(Arc::ptr_eq(&serving, &vm));
    let intents = reconcile_vm(serving).await;
    assert!(
        matches!(&intents[0], Intent::UpdateStatus { status } if status["phase"] == "Active"),
        "{intents:?}"
    );

    // The serving version's bytes again: nothing to tell the controller.
    put(&vm_path, &vm_bytes);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The next change observed is the following one, so the rewrite produced none.
    fs::remove_file(&trivial_path).unwrap();
    assert_eq!(name(&removed(next(&mut rx).await)), "hostile-ok");
    assert!(Arc::ptr_eq(&loader.current()[0].0, &vm));
}

/// Same bytes, new settings: one Replaced carrying both versions. A config with a typo fails,
/// naming the config file, and the last good version keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_change_replaces_the_plugin_and_a_bad_config_fails() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(
        common::plugin_path("virtualmachine"),
        dir.path().join("vm.wasm"),
    )
    .unwrap();
    let toml = dir.path().join("vm.toml");
    fs::write(&toml, "[settings]\nlevel = 1\n").unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    let (first, _) = added(next(&mut rx).await);

    put(&toml, "deadline_ms = 500\n[settings]\nlevel = 2\n");
    let (old, new, config) = replaced(next(&mut rx).await);
    assert!(Arc::ptr_eq(&old, &first));
    assert_eq!(old.settings(), r#"{"level":1}"#);
    assert_eq!(new.settings(), r#"{"level":2}"#);
    assert_eq!(old.digest(), new.digest());
    assert_eq!(config.deadline(), Some(Duration::from_millis(500)));
    assert_eq!(settings(&loader, "virtualmachine"), json!({"level": 2}));
    // A reconcile holding the old version (in flight during the swap) still runs on it.
    assert!(!reconcile_vm(old).await.is_empty());

    put(&toml, "concurency = 4\n");
    let (path, error) = failed(next(&mut rx).await);
    assert_eq!(path, dir.path().join("vm.wasm"));
    assert!(
        error.contains("vm.toml") && error.contains("concurency"),
        "{error}"
    );
    assert_eq!(settings(&loader, "virtualmachine"), json!({"level": 2}));

    // Switching format is fine; removing the config reloads with no settings.
    fs::remove_file(&toml).unwrap();
    put(&dir.path().join("vm.json"), r#"{"settings": {"level": 3}}"#);
    let (_, new, _) = replaced(next(&mut rx).await);
    assert_eq!(new.settings(), r#"{"level":3}"#);
    fs::remove_file(dir.path().join("vm.json")).unwrap();
    let (_, new, config) = replaced(next(&mut rx).await);
    assert_eq!(new.settings(), "");
    assert_eq!(config, PluginConfig::default());
}

/// Two files, one name: the first serves, the second fails naming both and takes over (here
/// with its own settings, so as a Replaced) when the first is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_name_waits_for_the_first_file_to_go() {
    let dir = tempfile::tempdir().unwrap();
    for (file, level) in [("a", 1), ("b", 2)] {
        fs::copy(
            common::plugin_path("trivial"),
            dir.path().join(format!("{file}.wasm")),
        )
        .unwrap();
        fs::write(
            dir.path().join(format!("{file}.toml")),
            format!("[settings]\nlevel = {level}\n"),
        )
        .unwrap();
    }
    let (loader, mut rx) = start(dir.path()).await;
    let (first, _) = added(next(&mut rx).await);
    assert_eq!(first.settings(), r#"{"level":1}"#);
    let (path, error) = failed(next(&mut rx).await);
    assert_eq!(path, dir.path().join("b.wasm"));
    assert!(
        error.contains("a.wasm") && error.contains("b.wasm"),
        "{error}"
    );
    assert_eq!(names(&loader), ["trivial"]);

    fs::remove_file(dir.path().join("a.wasm")).unwrap();
    let (old, new, _) = replaced(next(&mut rx).await);
    assert!(Arc::ptr_eq(&old, &first));
    assert_eq!(new.settings(), r#"{"level":2}"#);
    assert_eq!(settings(&loader, "trivial"), json!({"level": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_file_removes_its_plugin() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(
        common::plugin_path("trivial"),
        dir.path().join("trivial.wasm"),
    )
    .unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    let (trivial, _) = added(next(&mut rx).await);

    fs::remove_file(dir.path().join("trivial.wasm")).unwrap();
    assert!(Arc::ptr_eq(&removed(next(&mut rx).await), &trivial));
    assert!(loader.current().is_empty());
    // Handed-out versions outlive their removal: an in-flight reconcile finishes on them.
    assert_eq!(name(&trivial), "trivial");
}

/// Renaming a file moves nothing the controller can see: same name, same bytes, same config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_a_file_is_not_a_change() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(common::plugin_path("trivial"), dir.path().join("a.wasm")).unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    let (trivial, _) = added(next(&mut rx).await);

    fs::rename(dir.path().join("a.wasm"), dir.path().join("b.wasm")).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(Arc::ptr_eq(&loader.current()[0].0, &trivial));
    // The next change observed is the following one, so the rename produced none; and it is
    // `b.wasm` that now serves the name.
    fs::remove_file(dir.path().join("b.wasm")).unwrap();
    assert!(Arc::ptr_eq(&removed(next(&mut rx).await), &trivial));
}

/// Kubernetes ConfigMap/Secret volumes: `vm.wasm -> ..data/vm.wasm`, `..data -> ..<timestamp>`,
/// updated by renaming a fresh `..data` link over the old one. No event names `vm.wasm`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_style_data_swap_is_picked_up() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let version = |stamp: &str, wasm: &str, settings: &str| {
        let data = root.join(stamp);
        fs::create_dir(&data).unwrap();
        fs::write(data.join("vm.wasm"), common::plugin_bytes(wasm)).unwrap();
        fs::write(data.join("vm.toml"), format!("[settings]\n{settings}\n")).unwrap();
    };
    let swap = |stamp: &str| {
        symlink(stamp, root.join("..data_tmp")).unwrap();
        fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    };
    version("..2026_01", "virtualmachine", "level = 1");
    symlink("..2026_01", root.join("..data")).unwrap();
    symlink("..data/vm.wasm", root.join("vm.wasm")).unwrap();
    symlink("..data/vm.toml", root.join("vm.toml")).unwrap();

    let (loader, mut rx) = start(root).await;
    let (first, _) = added(next(&mut rx).await);
    assert_eq!(first.settings(), r#"{"level":1}"#);

    version("..2026_02", "virtualmachine", "level = 2");
    swap("..2026_02");
    fs::remove_dir_all(root.join("..2026_01")).unwrap();
    let (old, new, _) = replaced(next(&mut rx).await);
    assert!(Arc::ptr_eq(&old, &first));
    assert_eq!(new.settings(), r#"{"level":2}"#);

    // New bytes through the same links: a different plugin name, so an add and a removal.
    version("..2026_03", "hostile", "mode = \"ok\"");
    swap("..2026_03");
    let (hostile, _) = added(next(&mut rx).await);
    assert_eq!(name(&hostile), "hostile-ok");
    assert_eq!(name(&removed(next(&mut rx).await)), "virtualmachine");
    assert_eq!(names(&loader), ["hostile-ok"]);
}

/// A plugin caught half-written fails without harm and loads once the rest arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_file_is_retried_when_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    let bytes = common::plugin_bytes("trivial");
    let path = dir.path().join("trivial.wasm");

    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let (failed_path, _) = failed(next(&mut rx).await);
    assert_eq!(failed_path, path);
    assert!(loader.current().is_empty());

    fs::write(&path, &bytes).unwrap();
    // On a stalled machine the loader may also catch the half file being created: more failures
    // before the success are fine.
    let trivial = loop {
        match next(&mut rx).await {
            Change::Added(plugin, _) => break plugin,
            Change::Failed { path: p, .. } => assert_eq!(p, path),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(name(&trivial), "trivial");
}

/// Twenty config rewrites in a row, with a corrupt plugin in the middle, settle on the last good
/// version, and the loader keeps working afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_ends_on_the_last_good_version() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("vm.wasm");
    let toml = dir.path().join("vm.toml");
    let good = common::plugin_bytes("virtualmachine");
    fs::write(&wasm, &good).unwrap();
    fs::write(&toml, "[settings]\nlevel = 0\n").unwrap();
    let (loader, mut rx) = start(dir.path()).await;
    added(next(&mut rx).await);

    for level in 1..=20 {
        if level == 10 {
            fs::write(&wasm, &good[..good.len() / 3]).unwrap();
        }
        if level == 12 {
            fs::write(&wasm, &good).unwrap();
        }
        fs::write(&toml, format!("[settings]\nlevel = {level}\n")).unwrap();
        tokio::time::sleep(Duration::from_millis(10 * (level % 4))).await;
    }

    // Drain until the last version is announced; every step on the way must be well-formed.
    loop {
        match next(&mut rx).await {
            Change::Replaced { new, .. } if new.settings() == r#"{"level":20}"# => break,
            Change::Replaced { new, .. } => assert_eq!(name(&new), "virtualmachine"),
            Change::Failed { path, .. } => assert_eq!(path, wasm),
            other => panic!("unexpected {other:?}"),
        }
    }
    let current = loader.current();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0].0.settings(), r#"{"level":20}"#);
    assert_eq!(current[0].0.digest(), wasmctrl::runtime::digest(&good));

    put(&toml, "[settings]\nlevel = 21\n");
    let (_, new, _) = replaced(next(&mut rx).await);
    assert_eq!(new.settings(), r#"{"level":21}"#);
    loader.shutdown().await;
    assert!(rx.recv().await.is_none(), "the channel closes on shutdown");
}

/// A new version that asks for more than the one it replaces is refused, naming what it asks
/// for, and the old version keeps serving; once the operator approves exactly that, it loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_asking_for_more_is_refused_until_approved() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trivial.wasm");
    let config = dir.path().join("trivial.toml");
    // The hostile plugin in `own` mode poses as a new version of `trivial` that also owns
    // ConfigMaps; `trivial` itself ignores settings.
    let settings = "[settings]\nmode = \"own\"\nname = \"trivial\"\n";
    put(&config, settings);
    put(&path, common::plugin_bytes("trivial"));
    let (loader, mut rx) = start(dir.path()).await;
    let (trivial, _) = added(next(&mut rx).await);

    put(&path, common::plugin_bytes("hostile"));
    let (failed_path, error) = failed(next(&mut rx).await);
    assert_eq!(failed_path, path);
    assert!(
        error.contains("asks for more than the version it replaces"),
        "{error}"
    );
    let wanted = "apply v1/ConfigMap in all namespaces (beside the owner)";
    assert!(error.contains(wanted), "{error}");
    assert!(error.contains("trivial.toml"), "{error}");
    assert!(
        Arc::ptr_eq(&loader.current()[0].0, &trivial),
        "the old version keeps serving"
    );

    // Approving all but one addition is not enough.
    let additions = ["get", "list", "apply", "patch", "delete"].map(|verb| {
        let place = if ["get", "list"].contains(&verb) {
            ""
        } else {
            " (beside the owner)"
        };
        format!("{verb} v1/ConfigMap in all namespaces{place}")
    });
    let approve = |list: &[String]| format!("approve = {list:?}\n{settings}");
    put(&config, approve(&additions[1..]));
    let (_, error) = failed(next(&mut rx).await);
    assert!(
        error.contains("get v1/ConfigMap in all namespaces"),
        "{error}"
    );
    assert!(
        !error.contains(wanted),
        "only the unapproved one is named: {error}"
    );
    assert!(Arc::ptr_eq(&loader.current()[0].0, &trivial));

    put(&config, approve(&additions));
    let (old, new, _) = replaced(next(&mut rx).await);
    assert!(Arc::ptr_eq(&old, &trivial));
    assert_eq!(name(&new), "trivial");
    assert_eq!(new.manifest().owns().len(), 1);
}
