//! The clients of the sharded caches' watches: every list and watch one sends carries the
//! `shardSelector` of its watch's slots, and every list it receives tells whether the server
//! applied it.
//!
//! A client rather than a watcher option because kube-runtime's `watcher::Config` has no
//! `shardSelector` (kube 5 predates KEP-5866): the informers keep kube-runtime's watcher
//! (paging, bookmarks, 410 recovery) and this client adds the parameter underneath it.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use http_body_util::BodyExt as _;
use kube::client::Body;
use serde::Deserialize;

use super::{Shards, SlotSet};

/// A client over `client` whose GETs carry the `shardSelector` of `slots` (by `shards`' field),
/// and that tells `shards` whether the server applied it.
pub fn sharded_client(client: kube::Client, shards: Shards, slots: SlotSet) -> kube::Client {
    let namespace = client.default_namespace().to_string();
    let selector = slots.selector(shards.field()).map(|s| s.to_string());
    let service = Sharded {
        client,
        shards,
        selector,
    };
    kube::Client::new(service, namespace)
}

#[derive(Clone)]
struct Sharded {
    client: kube::Client,
    shards: Shards,
    /// Rendered once: it goes on every request.
    selector: Option<String>,
}

impl tower::Service<Request<Body>> for Sharded {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // `kube::Client::send` waits for its own buffer's readiness.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let selector = (self.selector)
            .as_ref()
            .filter(|_| request.method() == Method::GET);
        let mut list = false;
        if let Some(selector) = selector {
            let uri = request.uri();
            let query = uri.query().unwrap_or("");
            list = !url::form_urlencoded::parse(query.as_bytes())
                .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
            let added = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("shardSelector", selector)
                .finish();
            let joined = if query.is_empty() {
                format!("{}?{added}", uri.path())
            } else {
                format!("{}?{query}&{added}", uri.path())
            };
            let mut parts = uri.clone().into_parts();
            if let Ok(pq) = joined.parse() {
                parts.path_and_query = Some(pq);
                if let Ok(uri) = http::Uri::from_parts(parts) {
                    *request.uri_mut() = uri;
                }
            }
        }
        let (client, shards) = (self.client.clone(), self.shards.clone());
        async move {
            let response = client.send(request).await?;
            if !list || !response.status().is_success() {
                return Ok(response);
            }
            // A list page is read whole by the watcher anyway; look for `shardInfo` in it.
            let (parts, body) = response.into_parts();
            let bytes: Bytes = body
                .collect()
                .await
                .map_err(|e| kube::Error::Service(Box::new(e)))?
                .to_bytes();
            shards.saw_list(has_shard_info(&bytes));
            Ok(Response::from_parts(parts, Body::from(bytes)))
        }
        .boxed()
    }
}

/// Whether a list response's metadata has `shardInfo` (the items are skipped, not decoded).
fn has_shard_info(list: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct List {
        metadata: Meta,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "shardInfo")]
        shard_info: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<List>(list).is_ok_and(|l| l.metadata.shard_info.is_some())
}

#[cfg(test)]
mod tests {
    use super::has_shard_info;

    #[test]
    fn lists_tell_whether_the_server_sharded_them() {
        let sharded = br#"{"kind":"List","metadata":{"resourceVersion":"5","shardInfo":{"selector":"x"}},"items":[{"a":1}]}"#;
        assert!(has_shard_info(sharded));
        let whole = br#"{"kind":"List","metadata":{"resourceVersion":"5"},"items":[]}"#;
        assert!(!has_shard_info(whole));
        assert!(!has_shard_info(b"not json"));
    }
}
