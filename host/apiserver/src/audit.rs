//! A record of the resource requests the server answered, as an audit log would show them, so
//! tests can assert on what a client asked for (and what it never asked for). Bounded: the
//! oldest records go first.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use wasmctrl_core::sync::lock;

/// Records kept; older ones are dropped.
const CAPACITY: usize = 200_000;

/// One resource request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// API group (empty for core).
    pub group: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource (`status`), empty for none.
    pub subresource: String,
    /// Namespace in the URL, empty for cluster-wide requests.
    pub namespace: String,
    /// Object name in the URL, empty for collections.
    pub name: String,
    /// `labelSelector`, empty for none.
    pub label_selector: String,
    /// `fieldSelector`, empty for none.
    pub field_selector: String,
    /// `shardSelector` (KEP-5866), empty for none or when the server does not shard.
    pub shard_selector: String,
    /// The client's User-Agent.
    pub user_agent: String,
    /// Who the request was made as: the authenticated user, or the user it impersonated.
    pub user: String,
}

/// The log.
#[derive(Debug, Default)]
pub struct Log {
    records: Mutex<VecDeque<Request>>,
}

impl Log {
    pub(crate) fn record(&self, request: Request) {
        let mut records = lock(&self.records);
        if records.len() == CAPACITY {
            records.pop_front();
        }
        records.push_back(request);
    }

    /// Every record kept, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        let records = lock(&self.records);
        records.iter().cloned().collect()
    }
}
