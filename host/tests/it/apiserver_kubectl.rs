//! kubectl (the real binary) against the HTTP listener, without `--validate=false`.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmctrl::apiserver::{ApiServer, HttpServer};

/// kubectl from PATH, as users run it (`make deps` installs one when the machine has none).
const KUBECTL: &str = "kubectl";

struct Env {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Env {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(KUBECTL);
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c.arg("--cache-dir").arg(self.dir.path().join("cache"));
        c.args(args);
        c.env("HOME", self.dir.path());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.cmd(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_slice(&self.run(args).stdout).expect("JSON output")
    }

    /// Applies [`CRD`] and waits until it is established.
    fn install_widget_crd(&self) {
        let crd = self.file("crd.yaml", CRD);
        self.run(&["apply", "-f", &crd]);
        self.run(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=20s",
        ]);
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }
}

/// An HTTP API server on loopback with kubectl pointed at it. Fields drop in order: the
/// listener stops while the runtime it runs on is still up.
struct Cluster {
    env: Env,
    _http: HttpServer,
    _server: ApiServer,
    _rt: tokio::runtime::Runtime,
}

fn start() -> Cluster {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async {
        ApiServer::builder()
            .gc(true)
            .namespace_cleanup(true)
            .build()
            .unwrap()
    });
    let http = rt
        .block_on(server.serve("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, http.kubeconfig()).unwrap();
    Cluster {
        env: Env { dir, kubeconfig },
        _http: http,
        _server: server,
        _rt: rt,
    }
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 1}
"#;

fn wait_exit(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn kubectl_end_to_end() {
    // A missing kubectl is a broken setup, never a pass: the other kubectl tests need it too.
    let version = Command::new(KUBECTL)
        .args(["version", "--client"])
        .output()
        .expect("kubectl on PATH (make deps installs it)");
    assert!(version.status.success(), "kubectl version --client failed");
    let cluster = start();
    let env = &cluster.env;

    env.install_widget_crd();
    let res = String::from_utf8(env.run(&["api-resources"]).stdout).unwrap();
    assert!(
        res.lines().any(|l| l.starts_with("widgets")
            && l.contains("example.com/v1")
            && l.contains("Widget")),
        "{res}"
    );

    let widget = env.file("widget.yaml", WIDGET);
    env.run(&["apply", "-f", &widget]);
    let w = env.json(&["get", "widget", "w1", "-o", "json"]);
    assert_eq!(w["spec"]["size"], 1);
    // Re-applying a change goes through kubectl's client-side apply patch.
    let widget2 = env.file("widget2.yaml", &WIDGET.replace("size: 1", "size: 2"));
    env.run(&["apply", "-f", &widget2]);
    assert_eq!(
        env.json(&["get", "wd", "w1", "-o", "json"])["spec"]["size"],
        2
    );

    // get -w sees a change.
    let mut watch = env
        .cmd(&[
            "get",
            "widget",
            "w1",
            "-w",
            "-o",
            "json",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut s = stdout;
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    env.run(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":3}}"#,
    ]);
    let mut seen = String::new();
    let start = Instant::now();
    let has_change = |s: &str| s.replace(' ', "").contains("\"size\":3");
    while !has_change(&seen) && start.elapsed() < Duration::from_secs(15) {
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push_str(&s);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        has_change(&seen) && seen.contains("MODIFIED"),
        "watch output: {seen}"
    );

    env.run(&[
        "patch",
        "widget",
        "w1",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/size","value":4}]"#,
    ]);
    assert_eq!(
        env.json(&["get", "widget", "w1", "-o", "json"])["spec"]["size"],
        4
    );

    // Server-side apply (kubectl's own field manager; force because kubectl-client-side-apply owns spec).
    let ssa = env.file(
        "ssa.yaml",
        &WIDGET.replace("w1", "w2").replace("size: 1", "size: 7"),
    );
    env.run(&["apply", "--server-side", "-f", &ssa]);
    let w2 = env.json(&["get", "widget", "w2", "-o", "json", "--show-managed-fields"]);
    assert_eq!(w2["spec"]["size"], 7);
    assert_eq!(w2["metadata"]["managedFields"][0]["manager"], "kubectl");
    let ssa_conflict = env.file("ssa2.yaml", &WIDGET.replace("size: 1", "size: 8"));
    let out = env
        .cmd(&["apply", "--server-side", "-f", &ssa_conflict])
        .output()
        .unwrap();
    assert!(!out.status.success(), "conflict expected");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("conflict"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.run(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &ssa_conflict,
    ]);
    assert_eq!(
        env.json(&["get", "widget", "w1", "-o", "json"])["spec"]["size"],
        8
    );

    // wait --for=condition on a status written through the status subresource.
    env.run(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    env.run(&[
        "wait",
        "--for=condition=Ready",
        "widget/w1",
        "--timeout=20s",
    ]);

    // delete waits for the finalizer.
    env.run(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    let mut del = env
        .cmd(&["delete", "widget", "w1", "--timeout=30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_exit(&mut del, Duration::from_secs(2)).is_none(),
        "delete must wait for the finalizer"
    );
    let w = env.json(&["get", "widget", "w1", "-o", "json"]);
    assert!(w["metadata"]["deletionTimestamp"].is_string());
    env.run(&[
        "patch",
        "widget",
        "w1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let status = wait_exit(&mut del, Duration::from_secs(20)).expect("delete finishes");
    assert!(status.success());
    let out = env.cmd(&["get", "widget", "w1"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Built-in kinds: create, strategic patch via client-side apply, get -o json, delete.
    // Typed kubectl commands send protobuf bodies.
    env.run(&["create", "configmap", "c1", "--from-literal=a=1"]);
    env.run(&["create", "namespace", "team"]);
    env.run(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=k=v",
        "-n",
        "team",
    ]);
    let s1 = env.json(&["get", "secret", "s1", "-n", "team", "-o", "json"]);
    assert_eq!(s1["data"]["k"], "dg==");
    assert_eq!(
        env.json(&["get", "cm", "c1", "-o", "json"])["data"]["a"],
        "1"
    );
    let dep = env.file("dep.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d1}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec: {containers: [{name: c, image: nginx}]}\n");
    env.run(&["apply", "-f", &dep]);
    env.run(&[
        "apply",
        "-f",
        &env.file(
            "dep2.yaml",
            &std::fs::read_to_string(&dep)
                .unwrap()
                .replace("nginx", "nginx:2"),
        ),
    ]);
    let d = env.json(&["get", "deploy", "d1", "-o", "json"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    env.run(&["scale", "deployment", "d1", "--replicas=3"]);
    let d = env.json(&["get", "deploy", "d1", "-o", "json"]);
    assert_eq!(d["spec"]["replicas"], 3);
    env.run(&["get", "configmaps,deployments"]);
    env.run(&["delete", "configmap", "c1"]);
    drop(cluster);
}

/// `kubectl create deployment|service` and `kubectl expose` send protobuf bodies; each object
/// must be stored exactly as the JSON kubectl would have sent (`--dry-run=client -o json`),
/// that JSON defaulted by the server as any write is (a server-side dry run of it).
#[test]
fn kubectl_typed_deployment_and_service() {
    let cluster = start();
    let env = &cluster.env;
    let create = |kind: &str, name: &str, args: &[&str]| -> Value {
        let mut dry = args.to_vec();
        let at = dry.iter().position(|a| *a == "--").unwrap_or(dry.len());
        dry.splice(at..at, ["--dry-run=client", "-o", "json"]);
        let sent = env.json(&dry);
        let file = env.file(&format!("{kind}-{name}.json"), &sent.to_string());
        let want = env.json(&["create", "-f", &file, "--dry-run=server", "-o", "json"]);
        env.run(args);
        let got = env.json(&["get", kind, name, "-o", "json"]);
        // A Service's address is allocated on each create, the dry run's included.
        let spec = |o: &Value| {
            let mut spec = o["spec"].clone();
            if let Some(s) = spec.as_object_mut() {
                s.remove("clusterIP");
                s.remove("clusterIPs");
            }
            spec
        };
        assert_eq!(spec(&got), spec(&want), "{args:?}");
        assert_eq!(
            got["metadata"]["labels"], want["metadata"]["labels"],
            "{args:?}"
        );
        got
    };

    let d = create(
        "deployment",
        "web",
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
            "--port=8080",
        ],
    );
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    let pod = &d["spec"]["template"];
    assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(
        pod["spec"]["containers"][0]["ports"][0]["containerPort"],
        8080
    );
    let t = create(
        "deployment",
        "tools",
        &[
            "create",
            "deployment",
            "tools",
            "--image=busybox",
            "--",
            "sleep",
            "3600",
        ],
    );
    assert_eq!(
        t["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["sleep", "3600"])
    );

    let s = create(
        "service",
        "web",
        &["create", "service", "clusterip", "web", "--tcp=80:8080"],
    );
    assert_eq!(s["spec"]["type"], "ClusterIP");
    assert_eq!(s["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(s["spec"]["ports"][0]["port"], 80);
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 8080);
    let e = create(
        "service",
        "web2",
        &[
            "expose",
            "deployment",
            "web",
            "--name=web2",
            "--port=80",
            "--target-port=8080",
        ],
    );
    assert_eq!(e["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(e["spec"]["ports"][0]["port"], 80);
    assert_eq!(e["spec"]["ports"][0]["targetPort"], 8080);
    let np = create(
        "service",
        "np",
        &[
            "create",
            "service",
            "nodeport",
            "np",
            "--tcp=80:http",
            "--node-port=30080",
        ],
    );
    assert_eq!(np["spec"]["type"], "NodePort");
    assert_eq!(np["spec"]["ports"][0]["nodePort"], 30080);
    assert_eq!(np["spec"]["ports"][0]["targetPort"], "http");
    let lb = create(
        "service",
        "lb",
        &["create", "service", "loadbalancer", "lb", "--tcp=443:8443"],
    );
    assert_eq!(lb["spec"]["type"], "LoadBalancer");
    let ext = create(
        "service",
        "ext",
        &[
            "create",
            "service",
            "externalname",
            "ext",
            "--external-name=example.com",
        ],
    );
    assert_eq!(ext["spec"]["externalName"], "example.com");

    env.run(&["scale", "deployment", "web", "--replicas=1"]);
    assert_eq!(
        env.json(&["get", "deployment", "web", "-o", "json"])["spec"]["replicas"],
        1
    );
    let out = String::from_utf8(env.run(&["get", "deploy", "web"]).stdout).unwrap();
    assert!(out.lines().any(|l| l.starts_with("web ")), "{out}");
    drop(cluster);
}

#[test]
fn kubectl_apply_is_validated_against_the_crd_schema() {
    let cluster = start();
    let env = &cluster.env;
    let crd = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/postgres-writer/crd.yaml"
    );
    env.run(&["apply", "-f", crd]);
    env.run(&[
        "wait",
        "--for=condition=Established",
        "crd/postgreswriters.demo.yash.com",
        "--timeout=20s",
    ]);
    let writer = |age: &str| {
        format!(
            "apiVersion: demo.yash.com/v1\nkind: PostgresWriter\nmetadata: {{name: bob}}\n\
             spec: {{table: students, name: Bob, age: {age}, country: Peru}}\n"
        )
    };

    let bad = env.file("bad.yaml", &writer("-1"));
    let out = env.cmd(&["apply", "-f", &bad]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an invalid object was accepted");
    assert!(
        stderr.contains("spec.age")
            && stderr.contains("spec.age in body should be greater than or equal to 0"),
        "{stderr}"
    );
    let missing = env.cmd(&["get", "postgreswriter", "bob"]).output().unwrap();
    assert!(!missing.status.success(), "the invalid object was stored");

    let good = env.file("good.yaml", &writer("30"));
    env.run(&["apply", "-f", &good]);
    let got = env.json(&["get", "pgw", "bob", "-o", "json"]);
    assert_eq!(got["spec"]["age"], 30);
}

/// Events are one resource in two groups, as in kube-apiserver: what a controller records
/// through `events.k8s.io/v1` (as wasmctrl's applier and kube-runtime's recorder do) is what
/// `kubectl describe` and `kubectl get events` show through core/v1, and the other way round.
#[test]
fn kubectl_describe_shows_events_recorded_through_events_k8s_io() {
    let cluster = start();
    let env = &cluster.env;
    env.install_widget_crd();
    let widget = env.file("widget.yaml", WIDGET);
    env.run(&["apply", "-f", &widget]);
    let uid = env.json(&["get", "widget", "w1", "-o", "json"])["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let recorded = env.file(
        "event.yaml",
        &format!(
            r#"
apiVersion: events.k8s.io/v1
kind: Event
metadata: {{name: w1.recorded, namespace: default}}
eventTime: "2026-11-25T00:00:00.000000Z"
type: Warning
reason: Resized
action: Reconcile
note: the widget grew to size 2
reportingController: example.com/widget-controller
reportingInstance: widget-controller-0
regarding: {{apiVersion: example.com/v1, kind: Widget, namespace: default, name: w1, uid: "{uid}"}}
"#
        ),
    );
    env.run(&["create", "-f", &recorded]);

    // `kubectl describe` lists the object's Events through core/v1, selected by
    // involvedObject.name, .namespace, .kind and .uid.
    let described = String::from_utf8(env.run(&["describe", "widget", "w1"]).stdout).unwrap();
    let events = described
        .split_once("Events:")
        .map(|(_, e)| e)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    assert!(
        events.contains("Warning") && events.contains("Resized"),
        "{described}"
    );
    assert!(events.contains("the widget grew to size 2"), "{described}");

    let core = env.json(&["get", "events", "w1.recorded", "-o", "json"]);
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "the widget grew to size 2");
    assert_eq!(core["involvedObject"]["uid"], json!(uid));
    assert_eq!(core["reportingComponent"], "example.com/widget-controller");
    assert!(core.get("note").is_none() && core.get("regarding").is_none());
    let selected = |selector: &str| -> Vec<String> {
        env.json(&["get", "events", "--field-selector", selector, "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        selected("involvedObject.name=w1,type=Warning"),
        ["w1.recorded"]
    );
    assert!(selected("involvedObject.name=w2").is_empty());

    // A core/v1 write shows through events.k8s.io in its fields' names there.
    env.run(&[
        "patch",
        "events",
        "w1.recorded",
        "--type=merge",
        "-p",
        r#"{"message": "the widget grew to size 3", "count": 2}"#,
    ]);
    let v1 = env.json(&["get", "events.events.k8s.io", "w1.recorded", "-o", "json"]);
    assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
    assert_eq!(v1["note"], "the widget grew to size 3");
    assert_eq!(v1["deprecatedCount"], 2);
    assert_eq!(v1["regarding"]["name"], "w1");
    assert!(v1.get("message").is_none() && v1.get("involvedObject").is_none());
    // One object: deleting it through one group deletes it from both.
    env.run(&["delete", "events.events.k8s.io", "w1.recorded"]);
    let (ok, out) = {
        let o = env.cmd(&["get", "events", "w1.recorded"]).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert!(!ok && out.contains("NotFound"), "{out}");
}

#[test]
fn kubectl_get_prints_and_selects_built_in_kinds_as_kube_apiserver_does() {
    let cluster = start();
    let env = &cluster.env;
    let objects = env.file(
        "objects.yaml",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  nodeName: node1
  containers: [{name: c, image: nginx}, {name: sidecar, image: envoy}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: p1.scheduled, namespace: default}
eventTime: "2026-11-26T00:00:00.000000Z"
type: Normal
reason: Scheduled
action: Binding
note: Successfully assigned default/p1 to node1
reportingController: default-scheduler
reportingInstance: default-scheduler-0
regarding: {apiVersion: v1, kind: Pod, namespace: default, name: p1}
"#,
    );
    env.run(&["apply", "-f", &objects]);
    env.run(&[
        "patch",
        "pod",
        "p1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "c", "ready": true, "restartCount": 0, "image": "nginx", "imageID": "", "state": {"running": {}}},
            {"name": "sidecar", "ready": false, "restartCount": 3, "image": "envoy", "imageID": "",
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}"#,
    ]);
    // The printed table, one Vec of cells per line, header first.
    let table = |args: &[&str]| -> Vec<Vec<String>> {
        String::from_utf8(env.run(args).stdout)
            .unwrap()
            .lines()
            .map(|l| {
                l.split("   ")
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .collect()
    };

    let pods = table(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        pods[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ]
    );
    assert_eq!(pods[1][..4], ["p1", "1/2", "CrashLoopBackOff", "3"]);
    assert_eq!(pods[1][5..], ["10.0.0.7", "node1", "<none>", "<none>"]);
    // Pods' own field labels, as `kubectl describe node` and `kubectl drain` select them.
    let on_node = |node: &str| {
        let selector = format!("spec.nodeName={node},status.phase!=Succeeded");
        env.json(&["get", "pods", "--field-selector", &selector, "-o", "json"])["items"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!((on_node("node1"), on_node("node2")), (1, 0));

    let deployments = table(&["get", "deploy", "-o", "wide"]);
    assert_eq!(
        deployments[0],
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(deployments[1][..4], ["web", "0/2", "0", "0"]);
    assert_eq!(deployments[1][5..], ["c", "nginx", "app=web"]);

    // Events through either group print the same, without -o wide as kube's do.
    for resource in ["events", "events.events.k8s.io"] {
        let events = table(&["get", resource]);
        assert_eq!(
            events[0],
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "{resource}"
        );
        assert_eq!(
            events[1][1..],
            [
                "Normal",
                "Scheduled",
                "pod/p1",
                "Successfully assigned default/p1 to node1"
            ],
            "{resource}"
        );
    }
    let wide = table(&["get", "events", "-o", "wide"]);
    assert_eq!(wide[1][4], "default-scheduler, default-scheduler-0");
}

/// kubectl's typed commands speak protobuf both ways (client-go's protobuf content type for
/// built-in kinds): each object kubectl decodes from the server's protobuf answer (`-o json`
/// prints it) is the one a JSON read returns, and a refusal arrives as a protobuf Status whose
/// message kubectl prints.
#[test]
fn kubectl_reads_protobuf_answers_of_every_kind_it_creates() {
    let cluster = start();
    let env = &cluster.env;
    let commands: &[(&str, &[&str])] = &[
        (
            "deployment/web",
            &[
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=2",
                "--port=80",
            ],
        ),
        (
            "job/once",
            &["job", "once", "--image=busybox", "--", "true"],
        ),
        (
            "cronjob/tick",
            &[
                "cronjob",
                "tick",
                "--image=busybox",
                "--schedule=*/5 * * * *",
            ],
        ),
        ("configmap/c1", &["configmap", "c1", "--from-literal=a=1"]),
        (
            "secret/s1",
            &["secret", "generic", "s1", "--from-literal=k=v"],
        ),
        (
            "service/web",
            &["service", "nodeport", "web", "--tcp=80:8080"],
        ),
        (
            "priorityclass/high",
            &["priorityclass", "high", "--value=1000"],
        ),
        (
            "resourcequota/q",
            &["quota", "q", "--hard=pods=3,requests.cpu=0.5"],
        ),
        (
            "poddisruptionbudget/pdb",
            &["pdb", "pdb", "--selector=app=web", "--min-available=50%"],
        ),
        (
            "ingress/ing",
            &["ingress", "ing", "--rule=foo.com/bar*=web:80"],
        ),
        (
            "role/reader",
            &["role", "reader", "--verb=get,list", "--resource=pods"],
        ),
        (
            "rolebinding/readers",
            &["rolebinding", "readers", "--role=reader", "--user=u"],
        ),
        ("serviceaccount/bot", &["serviceaccount", "bot"]),
        ("namespace/team", &["namespace", "team"]),
    ];
    for (object, args) in commands {
        // Flags first: what follows `--` is the container's command.
        let mut create = vec!["create", "-o", "json", "-v=8"];
        create.extend_from_slice(args);
        let out = env.run(&create);
        // -v=8 logs the request's headers, then the response's.
        let log = String::from_utf8_lossy(&out.stderr);
        let response = log.split("Response Headers").nth(1).unwrap_or_default();
        assert!(
            response.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "{object}: not answered in protobuf:\n{log}"
        );
        let created: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
        let read = env.json(&["get", object, "-o", "json"]);
        assert_eq!(
            created, read,
            "{object}: decoded from protobuf ≠ read as JSON"
        );
    }
    let out = env
        .cmd(&[
            "create",
            "deployment",
            "bad",
            "--image=nginx",
            "--replicas=-1",
            "-v=8",
        ])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        log.split("Response Headers")
            .nth(1)
            .unwrap_or_default()
            .contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{log}"
    );
    assert!(
        log.contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        "{log}"
    );
}
