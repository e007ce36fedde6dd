//! Watch streams: chunked JSON lines of ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events, or
//! length-prefixed protobuf `WatchEvent`s to a client that prefers protobuf.
//!
//! A watch starts from a resourceVersion (resuming from the per-resource history, or 410 Expired
//! when that history no longer reaches back), or with the current state as synthetic ADDED
//! events (`resourceVersion` unset/"0", or `sendInitialEvents=true` which ends the initial
//! state with a BOOKMARK annotated `k8s.io/initial-events-end`). It ends after
//! `timeoutSeconds`, when faults drop it, or when the client goes away.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, header};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Inner;
use super::handlers::{Query, Shape, Target, flag, render, selectors, visible};
use super::protobuf;
use super::selector::Selectors;
use super::status::{ApiError, ApiResult};
use super::store::{WatchEvent, WatchEventType};

/// How often idle watches with `allowWatchBookmarks=true` get a BOOKMARK.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);
/// Default and maximum watch duration (kube-apiserver's `--min-request-timeout` neighbourhood).
const MAX_TIMEOUT: u64 = 1800;

/// How a stream's events are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Json,
    Protobuf,
}

/// One event of the stream.
fn line(encoding: Encoding, kind: &str, obj: &Value) -> Bytes {
    if encoding == Encoding::Protobuf
        && let Some(frame) = protobuf::watch_frame(kind, obj)
    {
        return Bytes::from(frame);
    }
    let mut v = serde_json::to_vec(&json!({ "type": kind, "object": obj })).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

fn expired_line(encoding: Encoding, rv: u64, cur: u64) -> Bytes {
    let e = ApiError::expired(format!("too old resource version: {rv} ({cur})"));
    line(encoding, "ERROR", &e.to_status())
}

fn bookmark(encoding: Encoding, t: &Target, shape: Shape, rv: u64, initial_end: bool) -> Bytes {
    let (kind, av) = match shape {
        Shape::Meta | Shape::Table => (
            "PartialObjectMetadata".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        Shape::Full => (t.res.kind.clone(), t.api_version()),
    };
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if initial_end {
        meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    line(
        encoding,
        "BOOKMARK",
        &json!({ "kind": kind, "apiVersion": av, "metadata": meta }),
    )
}

struct Filter {
    t: Target,
    selectors: Selectors,
    shape: Shape,
    encoding: Encoding,
}

impl Filter {
    /// The line a stored event becomes for this watcher, if any.
    fn event(&self, ev: &WatchEvent) -> Option<Bytes> {
        let now = visible(&self.t, &self.selectors, &ev.object);
        let kind = match ev.kind {
            WatchEventType::Added | WatchEventType::Deleted => now.then_some(ev.kind.as_str())?,
            WatchEventType::Modified => {
                let before = ev
                    .old
                    .as_ref()
                    .is_some_and(|o| visible(&self.t, &self.selectors, o));
                match (before, now) {
                    (true, true) => "MODIFIED",
                    (false, true) => "ADDED",
                    (true, false) => "DELETED",
                    (false, false) => return None,
                }
            }
        };
        Some(line(
            self.encoding,
            kind,
            &render(&self.t, &ev.object, self.shape),
        ))
    }
}

/// Starts a watch and returns the streaming response, in protobuf when the client prefers it
/// and the kind has a protobuf form.
pub fn watch(
    inner: &Arc<Inner>,
    t: Target,
    q: &Query,
    shape: Shape,
    prefers_protobuf: bool,
) -> ApiResult<Response<Body>> {
    let (api_version, kind) = match shape {
        Shape::Full => (t.api_version(), t.res.kind.clone()),
        Shape::Meta | Shape::Table => ("meta.k8s.io/v1".into(), "PartialObjectMetadata".into()),
    };
    let encoding =
        if prefers_protobuf && shape != Shape::Table && protobuf::has_form(&api_version, &kind) {
            Encoding::Protobuf
        } else {
            Encoding::Json
        };
    let selectors = selectors(&t, q)?;
    let bookmarks = flag(q, "allowWatchBookmarks");
    let send_initial = flag(q, "sendInitialEvents");
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if send_initial && rv_match != "NotOlderThan" {
        return Err(ApiError::invalid(
            "ListOptions",
            "meta.k8s.io",
            "",
            &[("sendInitialEvents".into(), "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan".into())],
        ));
    }
    if !send_initial && !rv_match.is_empty() {
        return Err(ApiError::invalid(
            "ListOptions",
            "meta.k8s.io",
            "",
            &[("resourceVersionMatch".into(), "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into())],
        ));
    }
    let timeout = q
        .get("timeoutSeconds")
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {s}")))
        })
        .transpose()?
        .unwrap_or(MAX_TIMEOUT)
        .min(MAX_TIMEOUT);
    let rv_param = q
        .get("resourceVersion")
        .filter(|s| !s.is_empty() && *s != "0");
    let from: Option<u64> = match rv_param {
        Some(s) if !send_initial => Some(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
        ),
        _ => None,
    };
    let filter = Filter {
        t,
        selectors,
        shape,
        encoding,
    };
    let key = filter.t.key();
    let force_expire = inner.faults.take_expire();
    // Take the starting point and the initial state in one critical section so no event is
    // missed or doubled between them.
    let mut notify = inner.store.subscribe();
    let mut drop_rx = inner.faults.drop_signal();
    drop_rx.borrow_and_update();
    let (initial, start, expired) = {
        let st = inner.store.lock();
        match from {
            _ if force_expire => (vec![], st.rv(), Some((from.unwrap_or(0), st.rv()))),
            Some(rv) if rv < st.compacted(&key) => (vec![], st.rv(), Some((rv, st.rv()))),
            Some(rv) => (vec![], rv, None),
            None => {
                let objs: Vec<Arc<Value>> = st
                    .table_of(&key)
                    .map(|tab| {
                        tab.objects
                            .values()
                            .filter(|o| visible(&filter.t, &filter.selectors, o))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                (objs, st.rv(), None)
            }
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let inner = inner.clone();
    tokio::spawn(async move {
        if inner.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some((rv, cur)) = expired {
            let _ = tx.send(expired_line(encoding, rv, cur)).await;
            return;
        }
        for o in &initial {
            if tx
                .send(line(encoding, "ADDED", &render(&filter.t, o, filter.shape)))
                .await
                .is_err()
            {
                return;
            }
        }
        if send_initial
            && tx
                .send(bookmark(encoding, &filter.t, filter.shape, start, true))
                .await
                .is_err()
        {
            return;
        }
        let mut last = start;
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        notify.mark_changed();
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = drop_rx.changed() => return,
                // The client went away: end now rather than at the next send, which on a quiet
                // watch is the next bookmark tick, and stop holding the server meanwhile.
                () = tx.closed() => return,
                _ = tick.tick(), if bookmarks => {
                    if tx.send(bookmark(encoding, &filter.t, filter.shape, last, false)).await.is_err() {
                        return;
                    }
                }
                r = notify.changed() => {
                    if r.is_err() {
                        return;
                    }
                    let (events, cur) = {
                        let st = inner.store.lock();
                        (st.events_since(&key, last), st.rv())
                    };
                    let Ok(events) = events else {
                        let _ = tx.send(expired_line(encoding, last, cur)).await;
                        return;
                    };
                    for ev in events {
                        if let Some(b) = filter.event(&ev)
                            && tx.send(b).await.is_err() {
                                return;
                            }
                    }
                    last = last.max(cur);
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let content_type = match encoding {
        Encoding::Json => "application/json",
        Encoding::Protobuf => protobuf::WATCH_MEDIA_TYPE,
    };
    let mut response = Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_default();
    // Already in the negotiated encoding, and endless: not for the router to re-encode.
    response.extensions_mut().insert(protobuf::Encoded);
    Ok(response)
}
