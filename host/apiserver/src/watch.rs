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
use super::webhooks::Batch;

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
    /// The type of event a stored event is for this watcher, if any.
    fn event_type(&self, ev: &WatchEvent) -> Option<&'static str> {
        let now = visible(&self.t, &self.selectors, &ev.object);
        Some(match ev.kind {
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
        })
    }
}

/// What a watch request asks for, from its query parameters, refused as kube-apiserver refuses
/// them.
struct Params {
    /// `allowWatchBookmarks`.
    bookmarks: bool,
    /// `sendInitialEvents`.
    send_initial: bool,
    /// `timeoutSeconds`, at most [`MAX_TIMEOUT`].
    timeout: Duration,
    /// The resourceVersion to resume from; `None` starts with the current state.
    from: Option<u64>,
}

impl Params {
    fn parse(q: &Query) -> ApiResult<Self> {
        let bookmarks = flag(q, "allowWatchBookmarks");
        let send_initial = flag(q, "sendInitialEvents");
        let rv_match = q
            .get("resourceVersionMatch")
            .map(String::as_str)
            .unwrap_or("");
        let forbidden = |field: &str, message: &str| {
            ApiError::invalid(
                "ListOptions",
                "meta.k8s.io",
                "",
                &[(field.into(), format!("Forbidden: {message}"))],
            )
        };
        if send_initial && rv_match != "NotOlderThan" {
            return Err(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
            ));
        }
        if !send_initial && !rv_match.is_empty() {
            return Err(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
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
        let from = match rv_param {
            Some(s) if !send_initial => Some(
                s.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
            ),
            _ => None,
        };
        Ok(Self {
            bookmarks,
            send_initial,
            timeout: Duration::from_secs(timeout),
            from,
        })
    }
}

/// Where a watch starts: the objects to send as ADDED first, the resourceVersion after them,
/// and, when the history no longer reaches back, the expired range to answer with instead.
struct Start {
    initial: Vec<Arc<Value>>,
    rv: u64,
    expired: Option<(u64, u64)>,
}

impl Start {
    /// Taken in one critical section, so that no event is missed or doubled between the
    /// starting point and the events after it.
    fn at(inner: &Inner, filter: &Filter, from: Option<u64>, force_expire: bool) -> Self {
        let key = filter.t.key();
        let st = inner.store.lock();
        let (initial, rv, expired) = match from {
            _ if force_expire => (vec![], st.rv(), Some((from.unwrap_or(0), st.rv()))),
            Some(rv) if rv < st.compacted(&key) => (vec![], st.rv(), Some((rv, st.rv()))),
            Some(rv) => (vec![], rv, None),
            None => {
                let objs: Vec<Arc<Value>> = (st.table_of(&key))
                    .map(|tab| {
                        (tab.objects.values())
                            .filter(|o| visible(&filter.t, &filter.selectors, o))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                (objs, st.rv(), None)
            }
        };
        Self {
            initial,
            rv,
            expired,
        }
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
    let params = Params::parse(q)?;
    let filter = Filter {
        t,
        selectors,
        shape,
        encoding,
    };
    let force_expire = inner.faults.take_expire();
    // Subscribed to before the starting point is taken, so no change after it is missed.
    let notify = inner.store.subscribe();
    let mut dropped = inner.faults.drop_signal();
    dropped.borrow_and_update();
    let watcher = Watcher {
        notify,
        dropped,
        start: Start::at(inner, &filter, params.from, force_expire),
        inner: inner.clone(),
        filter,
        params,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(watcher.run(tx));
    Ok(streaming(rx, encoding))
}

/// One watch's stream, from its start to its end.
struct Watcher {
    inner: Arc<Inner>,
    filter: Filter,
    params: Params,
    start: Start,
    /// Wakes the stream when the store has changed.
    notify: tokio::sync::watch::Receiver<u64>,
    /// Ends the stream when faults drop every watch.
    dropped: tokio::sync::watch::Receiver<u64>,
}

impl Watcher {
    async fn run(mut self, tx: mpsc::Sender<Bytes>) {
        if self.inner.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let encoding = self.filter.encoding;
        if let Some((rv, cur)) = self.start.expired {
            let _ = tx.send(expired_line(encoding, rv, cur)).await;
            return;
        }
        if self.send_start(&tx).await.is_err() {
            return;
        }
        let key = self.filter.t.key();
        let mut last = self.start.rv;
        let deadline = tokio::time::sleep(self.params.timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        self.notify.mark_changed();
        let (t, shape) = (&self.filter.t, self.filter.shape);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = self.dropped.changed() => return,
                // The client went away: end now rather than at the next send, which on a quiet
                // watch is the next bookmark tick, and stop holding the server meanwhile.
                () = tx.closed() => return,
                _ = tick.tick(), if self.params.bookmarks => {
                    if tx.send(bookmark(encoding, t, shape, last, false)).await.is_err() {
                        return;
                    }
                }
                r = self.notify.changed() => {
                    if r.is_err() {
                        return;
                    }
                    let (events, cur) = {
                        let st = self.inner.store.lock();
                        (st.events_since(&key, last), st.rv())
                    };
                    let Ok(events) = events else {
                        let _ = tx.send(expired_line(encoding, last, cur)).await;
                        return;
                    };
                    for ev in events {
                        let Some(kind) = self.filter.event_type(&ev) else {
                            continue;
                        };
                        let object = match self.at_version(vec![ev.object.clone()], Batch::One).await {
                            Ok(mut o) => o.pop().unwrap_or_default(),
                            Err(e) => {
                                let _ = tx.send(line(encoding, "ERROR", &e.to_status())).await;
                                return;
                            }
                        };
                        if tx.send(line(encoding, kind, &render(t, &object, shape))).await.is_err() {
                            return;
                        }
                    }
                    last = last.max(cur);
                }
            }
        }
    }

    /// The initial state as ADDED events and, with `sendInitialEvents`, the BOOKMARK that ends
    /// it; `Err` when the client went away.
    async fn send_start(&self, tx: &mpsc::Sender<Bytes>) -> Result<(), ()> {
        let (encoding, t, shape) = (self.filter.encoding, &self.filter.t, self.filter.shape);
        let initial = match self
            .at_version(self.start.initial.clone(), Batch::List)
            .await
        {
            Ok(objects) => objects,
            Err(e) => {
                let _ = tx.send(line(encoding, "ERROR", &e.to_status())).await;
                return Err(());
            }
        };
        for o in &initial {
            let added = line(encoding, "ADDED", &render(t, o, shape));
            tx.send(added).await.map_err(|_| ())?;
        }
        if self.params.send_initial {
            let end = bookmark(encoding, t, shape, self.start.rv, true);
            tx.send(end).await.map_err(|_| ())?;
        }
        Ok(())
    }
}

impl Watcher {
    /// Stored objects at the watched version (a custom resource's converted by its webhook,
    /// a failure ending the watch with its error, as kube's watch ends when it cannot decode).
    async fn at_version(
        &self,
        objects: Vec<Arc<Value>>,
        batch: Batch,
    ) -> ApiResult<Vec<Arc<Value>>> {
        let t = &self.filter.t;
        (self.inner.webhooks)
            .convert(&t.res, &t.version, objects, batch)
            .await
    }
}

/// The streaming response carrying what the watcher sends on `rx`.
fn streaming(rx: mpsc::Receiver<Bytes>, encoding: Encoding) -> Response<Body> {
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
    response
}
