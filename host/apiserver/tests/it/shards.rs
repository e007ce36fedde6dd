//! KEP-5866's server-side sharded list and watch (`shardSelector`), through a real client.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::WatchEvent;
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

/// FNV-1a 64 written out from its definition, as the reference the server is checked against
/// (not the server's own function).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Four equal ranges of the hash space, as `[start, end)` bounds in hex.
fn quarters() -> Vec<(u128, u128)> {
    (0..4u128).map(|i| (i << 62, (i + 1) << 62)).collect()
}

fn selector(field: &str, (start, end): (u128, u128)) -> String {
    format!("shardRange(object.metadata.{field}, '0x{start:016x}', '0x{end:016x}')")
}

fn query(params: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish()
}

async fn get(client: &Client, path: &str) -> Result<Value, kube::Error> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(request).await
}

/// Every page of a list with `shardSelector`, checking each page echoes it in `shardInfo`.
async fn list_shard(client: &Client, shard: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let mut params = vec![("shardSelector", shard), ("limit", "700")];
        if !token.is_empty() {
            params.push(("continue", &token));
        }
        let page = get(client, &format!("/api/v1/configmaps?{}", query(&params)))
            .await
            .unwrap();
        assert_eq!(page["metadata"]["shardInfo"]["selector"], shard);
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_string(),
            _ => return items,
        }
    }
}

async fn create_namespaces(client: &Client, names: &[String]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
}

async fn create_config_map(client: &Client, namespace: &str, name: &str) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let map = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    maps.create(&PostParams::default(), &map).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_ranges_partition_ten_thousand_objects_by_uid_and_by_namespace() {
    let server = ApiServer::builder().build().unwrap();
    let client = server.client();
    let namespaces: Vec<String> = (0..40).map(|i| format!("tenant-{i}")).collect();
    create_namespaces(&client, &namespaces).await;
    futures::stream::iter(0..10_000)
        .map(|i| {
            let (client, ns) = (client.clone(), namespaces[i % namespaces.len()].clone());
            async move { create_config_map(&client, &ns, &format!("map-{i}")).await }
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;

    for field in ["uid", "namespace"] {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, range) in quarters().into_iter().enumerate() {
            let shard = selector(field, range);
            let items = list_shard(&client, &shard).await;
            for item in &items {
                let value = item["metadata"][field].as_str().unwrap();
                let hash = u128::from(fnv1a64(value.as_bytes()));
                assert!(
                    range.0 <= hash && hash < range.1,
                    "{field} {value} hashes to {hash:#x}, outside range {i} ({shard})"
                );
                let key = format!(
                    "{}/{}",
                    item["metadata"]["namespace"].as_str().unwrap(),
                    item["metadata"]["name"].as_str().unwrap()
                );
                *seen.entry(key).or_default() += 1;
            }
        }
        assert_eq!(seen.len(), 10_000, "by {field}: every object in some range");
        let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(doubled.is_empty(), "by {field}: in two ranges: {doubled:?}");
    }

    // Ranges joined by `||` select their union; a list without the selector has no shardInfo.
    let halves = format!(
        "{} || {}",
        selector("uid", quarters()[0]),
        selector("uid", quarters()[3])
    );
    let union = list_shard(&client, &halves).await.len();
    let (first, last) = (
        list_shard(&client, &selector("uid", quarters()[0]))
            .await
            .len(),
        list_shard(&client, &selector("uid", quarters()[3]))
            .await
            .len(),
    );
    assert_eq!(union, first + last);
    let whole = get(&client, "/api/v1/configmaps?limit=1").await.unwrap();
    assert!(whole["metadata"].get("shardInfo").is_none(), "{whole}");
}

#[tokio::test]
async fn watches_send_only_the_events_of_their_range() {
    let server = ApiServer::builder().build().unwrap();
    let client = server.client();
    // Namespaces in the lower and the upper half of the hash space: a namespace shard selector
    // decides by them alone.
    let (mut low, mut high) = (Vec::new(), Vec::new());
    for i in 0.. {
        let name = format!("team-{i}");
        if fnv1a64(name.as_bytes()) < 1 << 63 {
            low.push(name);
        } else {
            high.push(name);
        }
        if low.len() >= 3 && high.len() >= 3 {
            break;
        }
    }
    low.truncate(3);
    high.truncate(3);
    create_namespaces(&client, &[low.clone(), high.clone()].concat()).await;
    let lower_half = selector("namespace", (0, 1 << 63));
    let rv =
        get(&client, "/api/v1/configmaps?limit=1").await.unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    let path = format!(
        "/api/v1/configmaps?{}",
        query(&[
            ("watch", "true"),
            ("resourceVersion", &rv),
            ("shardSelector", &lower_half)
        ])
    );
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let mut events = client
        .request_events::<ConfigMap>(request)
        .await
        .unwrap()
        .boxed();
    for ns in high.iter().chain(&low) {
        create_config_map(&client, ns, "settings").await;
    }
    for ns in high.iter().chain(&low) {
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        maps.delete("settings", &DeleteParams::default())
            .await
            .unwrap();
    }
    // The last event of the lower half is the last namespace's delete: everything before it
    // has been sent by then.
    let mut got = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        let (kind, map) = match event {
            WatchEvent::Added(m) => ("ADDED", m),
            WatchEvent::Deleted(m) => ("DELETED", m),
            other => panic!("unexpected {other:?}"),
        };
        let ns = map.metadata.namespace.unwrap();
        let done = kind == "DELETED" && ns == low[2];
        got.push(format!("{kind} {ns}"));
        if done {
            break;
        }
    }
    let want: Vec<String> = ["ADDED", "DELETED"]
        .iter()
        .flat_map(|kind| low.iter().map(move |ns| format!("{kind} {ns}")))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn malformed_shard_selectors_are_bad_requests_naming_the_fault() {
    let server = ApiServer::builder().build().unwrap();
    let client = server.client();
    let bad = [
        "shardRange(object.metadata.name, '0x0', '0x1')",
        "shardRange(object.metadata.uid, '0x8', '0x1')",
        "range(object.metadata.uid, '0x0', '0x1')",
    ];
    let mut reasons = BTreeSet::new();
    for shard in bad {
        for watch in ["false", "true"] {
            let path = format!(
                "/api/v1/configmaps?{}",
                query(&[("shardSelector", shard), ("watch", watch)])
            );
            let Err(kube::Error::Api(status)) = get(&client, &path).await else {
                panic!("{shard} accepted");
            };
            assert_eq!(status.code, 400, "{shard}: {status:?}");
            assert!(
                status.message.contains("invalid shardSelector"),
                "{status:?}"
            );
            reasons.insert(status.message);
        }
    }
    assert_eq!(reasons.len(), bad.len(), "each names its own fault");
}
