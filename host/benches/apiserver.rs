//! Embedded API server benchmark: creates/s, listing 10,000 objects, and watch fan-out to 20
//! watchers. A plain `main` (no harness) printing the median of several short runs.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

const RUNS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn cm(name: String) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

async fn namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

async fn create_many(api: &Api<ConfigMap>, prefix: &str, n: usize) -> Duration {
    let start = Instant::now();
    stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &cm(name))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
        .unwrap();
    start.elapsed()
}

async fn creates_per_sec() -> f64 {
    let server = ApiServer::builder().history(100_000).build().unwrap();
    let client = server.client();
    let mut rates = Vec::new();
    for run in 0..RUNS {
        let ns = format!("c{run}");
        namespace(&client, &ns).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let n = 5000;
        let took = create_many(&api, "o", n).await;
        rates.push(n as f64 / took.as_secs_f64());
    }
    median(rates)
}

async fn durable_creates_per_sec() -> f64 {
    let dir = std::env::temp_dir().join(format!("wasmctrl-bench-{}", std::process::id()));
    let server = ApiServer::builder()
        .data_dir(Some(dir.clone()))
        .build()
        .unwrap();
    let client = server.client();
    let mut rates = Vec::new();
    for run in 0..3 {
        let ns = format!("d{run}");
        namespace(&client, &ns).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let n = 500;
        let took = create_many(&api, "o", n).await;
        rates.push(n as f64 / took.as_secs_f64());
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    median(rates)
}

async fn list_10k_ms() -> f64 {
    let server = ApiServer::builder().build().unwrap();
    let client = server.client();
    namespace(&client, "l").await;
    let api: Api<ConfigMap> = Api::namespaced(client, "l");
    create_many(&api, "o", 10_000).await;
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let l = api.list(&ListParams::default()).await.unwrap();
        assert_eq!(l.items.len(), 10_000);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    median(times)
}

async fn watch_fanout_events_per_sec() -> f64 {
    let mut rates = Vec::new();
    for run in 0..RUNS {
        let server = ApiServer::builder().history(100_000).build().unwrap();
        let client = server.client();
        let ns = format!("w{run}");
        namespace(&client, &ns).await;
        let api: Api<ConfigMap> = Api::namespaced(client, &ns);
        let rv = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let n = 2000usize;
        let watchers = 20;
        let mut handles = Vec::new();
        for _ in 0..watchers {
            let s = api
                .watch(&WatchParams::default().timeout(60), &rv)
                .await
                .unwrap();
            handles.push(tokio::spawn(async move {
                let mut s = s.boxed();
                let mut got = 0usize;
                while got < n {
                    match s.try_next().await {
                        Ok(Some(WatchEvent::Added(_))) => got += 1,
                        Ok(Some(_)) => {}
                        other => panic!("watch ended early: {other:?}"),
                    }
                }
                Instant::now()
            }));
        }
        let start = Instant::now();
        create_many(&api, "o", n).await;
        let mut last = start;
        for h in handles {
            last = last.max(h.await.unwrap());
        }
        rates.push((n * watchers) as f64 / (last - start).as_secs_f64());
    }
    median(rates)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = creates_per_sec().await;
        println!("creates/s (kube client, in-process, 32 in flight): median {c:.0}");
        let d = durable_creates_per_sec().await;
        println!("creates/s with --data-dir (fsync per write): median {d:.0}");
        let l = list_10k_ms().await;
        println!("list 10,000 ConfigMaps (kube client, typed): median {l:.1} ms");
        let w = watch_fanout_events_per_sec().await;
        println!("watch fan-out, 20 watchers x 2,000 events: median {w:.0} events/s delivered");
    });
}
