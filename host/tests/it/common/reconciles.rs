//! Reconciles as hosts' JSON logs record them (`reconciling` and `reconciled`, joined by
//! `reconcile.id`), for checking that no key was reconciled by two hosts at once.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

/// One reconcile of a key by a host, from its JSON log's start and end records.
#[derive(Debug)]
pub struct Span {
    /// Which host (the test's numbering).
    pub host: usize,
    /// `namespace/name`.
    pub key: String,
    /// When the host logged that it started.
    pub start: Timestamp,
    /// When it logged the end, or when it was killed.
    pub end: Timestamp,
}

/// The reconciles a host's JSON log records, each with its start and end. A host stopped
/// gracefully ends every reconcile it starts; one `killed` at a time may leave some unfinished,
/// which count as running until then.
pub fn spans(host: usize, log: &str, killed: Option<Timestamp>) -> Vec<Span> {
    let mut starts = BTreeMap::new();
    let mut spans = Vec::new();
    for line in log.lines() {
        let line: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let message = &line["fields"]["message"];
        if message != "reconciling" && message != "reconciled" {
            continue;
        }
        let id = line["span"]["reconcile.id"].as_u64().expect("reconcile.id");
        let at: Timestamp = (line["timestamp"].as_str().expect("timestamp"))
            .parse()
            .expect("an RFC 3339 timestamp");
        let key = line["span"]["object.key"].as_str().expect("object.key");
        if message == "reconciling" {
            starts.insert(id, (key.to_string(), at));
            continue;
        }
        let (key, start) = starts
            .remove(&id)
            .unwrap_or_else(|| panic!("reconcile {id} ended without starting: {line}"));
        spans.push(Span {
            host,
            key,
            start,
            end: at,
        });
    }
    match killed {
        Some(end) => spans.extend(starts.into_values().map(|(key, start)| Span {
            host,
            key,
            start,
            end,
        })),
        None => assert!(
            starts.is_empty(),
            "host {host} stopped gracefully, yet reconciles {:?} never ended",
            starts.keys()
        ),
    }
    spans
}

/// How many pairs of reconciles of one key by two hosts overlap in time.
pub fn overlapping(spans: &[Span]) -> usize {
    let mut pairs = 0;
    for (i, a) in spans.iter().enumerate() {
        pairs += (spans[i + 1..].iter())
            .filter(|b| b.key == a.key && b.host != a.host && !(a.end < b.start || b.end < a.start))
            .count();
    }
    pairs
}

/// Panics naming the first key two hosts reconciled at overlapping times; returns the spans by
/// key.
pub fn assert_no_overlap(spans: Vec<Span>) -> BTreeMap<String, Vec<Span>> {
    let mut by_key: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for span in spans {
        by_key.entry(span.key.clone()).or_default().push(span);
    }
    for (key, spans) in &by_key {
        for a in spans {
            for b in spans.iter().filter(|b| b.host != a.host) {
                assert!(
                    a.end < b.start || b.end < a.start,
                    "{key} reconciled by hosts {} and {} at overlapping times: {a:?} {b:?}",
                    a.host,
                    b.host
                );
            }
        }
    }
    by_key
}
