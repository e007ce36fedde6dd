//! Fault injection for tests: drop watch streams, expire the next watch with 410, answer chosen
//! verbs/resources with an error code a number of times, add latency to every request.
//!
//! The same handle backs the programmatic API (`ApiServer::faults()`) and the optional admin
//! endpoint (`/_admin/...`) on the HTTP listener.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;

use super::status::ApiError;
use wasmctrl_core::sync::lock;

/// One "answer with this error" rule.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Rule {
    /// Verb to match (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`); `None` = any.
    #[serde(default)]
    pub verb: Option<String>,
    /// Resource plural to match (`configmaps`); `None` = any.
    #[serde(default)]
    pub resource: Option<String>,
    /// HTTP code to answer (409, 429, 500, ...).
    pub code: u16,
    /// How many matching requests fail before the rule is spent.
    #[serde(default = "one")]
    pub times: u32,
}

fn one() -> u32 {
    1
}

/// The fault-injection handle; cheap to share (`Arc` inside the server).
#[derive(Debug)]
pub struct Faults {
    drop_tx: watch::Sender<u64>,
    expire_next: AtomicUsize,
    rules: Mutex<Vec<Rule>>,
    latency: Mutex<Duration>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            drop_tx: watch::channel(0).0,
            expire_next: AtomicUsize::new(0),
            rules: Mutex::new(Vec::new()),
            latency: Mutex::new(Duration::ZERO),
        }
    }
}

impl Faults {
    /// Ends every open watch stream (cleanly, as a load balancer or apiserver restart would).
    pub fn drop_watches(&self) {
        self.drop_tx.send_modify(|g| *g += 1);
    }

    /// The next watch request gets an ERROR event with a 410 Expired Status.
    pub fn expire_next_watch(&self) {
        self.expire_next.fetch_add(1, Ordering::SeqCst);
    }

    /// Answers the next `times` requests matching `verb`/`resource` with `code`.
    pub fn fail(&self, verb: Option<&str>, resource: Option<&str>, code: u16, times: u32) {
        self.add_rule(Rule {
            verb: verb.map(String::from),
            resource: resource.map(String::from),
            code,
            times,
        });
    }

    /// Adds a rule.
    pub fn add_rule(&self, rule: Rule) {
        lock(&self.rules).push(rule);
    }

    /// Adds `d` of latency before every API request.
    pub fn latency(&self, d: Duration) {
        *lock(&self.latency) = d;
    }

    /// Clears rules, latency and pending expiries.
    pub fn reset(&self) {
        lock(&self.rules).clear();
        self.latency(Duration::ZERO);
        self.expire_next.store(0, Ordering::SeqCst);
    }

    pub(crate) fn current_latency(&self) -> Duration {
        *lock(&self.latency)
    }

    pub(crate) fn drop_signal(&self) -> watch::Receiver<u64> {
        self.drop_tx.subscribe()
    }

    pub(crate) fn take_expire(&self) -> bool {
        self.expire_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The injected error for this request, if a rule matches (and consumes one use of it).
    pub(crate) fn check(&self, verb: &str, resource: &str) -> Option<ApiError> {
        let mut rules = lock(&self.rules);
        let i = rules.iter().position(|r| {
            r.verb.as_deref().is_none_or(|v| v == verb)
                && r.resource.as_deref().is_none_or(|x| x == resource)
        })?;
        let code = rules[i].code;
        rules[i].times = rules[i].times.saturating_sub(1);
        if rules[i].times == 0 {
            rules.remove(i);
        }
        Some(ApiError::injected(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_consumed() {
        let f = Faults::default();
        f.fail(Some("get"), Some("configmaps"), 429, 2);
        assert!(f.check("list", "configmaps").is_none());
        assert_eq!(f.check("get", "configmaps").unwrap().retry_after, Some(1));
        assert!(f.check("get", "configmaps").is_some());
        assert!(f.check("get", "configmaps").is_none());
        f.expire_next_watch();
        assert!(f.take_expire());
        assert!(!f.take_expire());
    }
}
