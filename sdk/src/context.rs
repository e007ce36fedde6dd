//! What a reconcile knows and can ask of the host: [`Context`] (settings, the host's clock, what
//! the previous reconcile's actions did, reads from the host's cache, SQL) and [`Host`], the
//! services behind it.

use jiff::Timestamp;
use kube_core::Resource;
use serde::de::DeserializeOwned;

use crate::request::Request;
use crate::sql::{Rows, SqlError, Statement};
use crate::{ActionFailure, ActionResult, Error, Gvk, NoSettings};

/// A log record's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// For debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something is off.
    Warn,
    /// Something failed.
    Error,
}

/// The host services a plugin uses. In wasm these are the component's imports; natively
/// [`crate::testing::Harness`] stands in for them.
pub trait Host {
    /// Records a log line with key/value fields.
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]);
    /// Reads one object as JSON; `Ok(None)` when it is not in the cache.
    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<String>, String>;
    /// Lists objects as JSON in a namespace (empty: all) matching a label selector (empty: all).
    fn list(&self, kind: &Gvk, namespace: &str, labels: &str) -> Result<Vec<String>, String>;
    /// Lists, as JSON, the objects of a kind in a namespace (empty: all) that the object with
    /// `owner_uid` controls.
    fn children(&self, kind: &Gvk, namespace: &str, owner_uid: &str)
    -> Result<Vec<String>, String>;
    /// Runs statements in one transaction on a granted database.
    fn sql(&self, database: &str, statements: &[Statement]) -> Result<Vec<Rows>, SqlError>;
}

/// Handed to [`crate::Reconciler::reconcile`]: the operator's settings, the key, the host's
/// clock, what the previous reconcile's actions did, typed cache reads and SQL. Log with the
/// [`tracing`](crate::tracing) macros.
pub struct Context<'a, S = NoSettings> {
    host: &'a dyn Host,
    settings: &'a S,
    request: &'a Request,
}

impl<'a, S> Context<'a, S> {
    /// A context for `request` over any [`Host`] with these settings; plugins get theirs from
    /// the host or the test harness.
    pub fn new(host: &'a dyn Host, settings: &'a S, request: &'a Request) -> Self {
        Self {
            host,
            settings,
            request,
        }
    }

    /// The operator's settings for this plugin, parsed by the SDK into the reconciler's
    /// [`Settings`](crate::Reconciler::Settings).
    pub fn settings(&self) -> &'a S {
        self.settings
    }

    /// The key reconciled: `namespace/name`, or `name` for a cluster-scoped kind.
    pub fn key(&self) -> String {
        self.request.key()
    }

    /// The host's current time. Read it rather than a clock: one reconcile sees one time, and
    /// tests set it ([`Harness::now`](crate::testing::Harness::now)).
    pub fn now(&self) -> Timestamp {
        self.request.now
    }

    /// [`now`](Self::now) as Kubernetes writes times (`metav1.Time`): RFC 3339 in UTC, to the
    /// second (`2026-11-22T10:00:00Z`).
    pub fn now_rfc3339(&self) -> String {
        self.request.now_rfc3339()
    }

    /// What each action of this key's previous reconcile did, in order; empty when there was
    /// none since the host (or this version of the plugin) started, or when it returned an
    /// error.
    pub fn previous(&self) -> &'a [ActionResult] {
        &self.request.previous
    }

    /// The previous reconcile's failed actions: each one's position and failure.
    pub fn failures(&self) -> impl Iterator<Item = (usize, &'a ActionFailure)> {
        self.request.failures()
    }

    /// Reads one cached object of kind `K` (declared in the manifest): `ctx.get::<Pod>(ns,
    /// name)`. `Ok(None)` when it is not cached.
    ///
    /// A kind the manifest did not declare, or an object that does not fit `K`, is a retryable
    /// error naming the object.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Result<Option<K>, Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.get_dynamic(&crate::Gvk::of::<K>(), namespace, name)
    }

    /// Lists cached objects of kind `K` (declared in the manifest) in `namespace` (empty: all)
    /// matching the label selector `labels` (empty: all), in namespace/name order.
    pub fn list<K>(&self, namespace: &str, labels: &str) -> Result<Vec<K>, Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.list_dynamic(&crate::Gvk::of::<K>(), namespace, labels)
    }

    /// Reads one cached object of a declared kind named by its group, version and kind (for a
    /// kind with no Rust type; [`get`](Self::get) takes the type), deserialized into `T`.
    ///
    /// A kind the manifest did not declare, or an object that does not fit `T`, is a retryable
    /// error naming the object.
    pub fn get_dynamic<T: DeserializeOwned>(
        &self,
        kind: &Gvk,
        namespace: &str,
        name: &str,
    ) -> Result<Option<T>, Error> {
        let Some(json) = self
            .host
            .get(kind, namespace, name)
            .map_err(Error::retryable)?
        else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| Error::retryable(format!("{} {namespace}/{name}: {e}", kind.kind)))
    }

    /// Lists cached objects of a declared kind named by its group, version and kind, deserialized
    /// into `T`, in namespace/name order ([`list`](Self::list) takes the type).
    pub fn list_dynamic<T: DeserializeOwned>(
        &self,
        kind: &Gvk,
        namespace: &str,
        labels: &str,
    ) -> Result<Vec<T>, Error> {
        let items = self.host.list(kind, namespace, labels);
        parse_each(items, || format!("listing {}", kind.kind))
    }

    /// The cached objects of kind `K` that `owner` controls (an owner reference with
    /// `controller: true` and its uid), in its namespace, in name order: the children a
    /// previous reconcile applied, found through the host's owner index as controller-runtime's
    /// `Owns` index finds them. `K` must be declared (owned, or read) in the manifest.
    ///
    /// ```ignore
    /// let jobs: Vec<Job> = ctx.children::<Job>(&cron_job)?;
    /// ```
    pub fn children<K>(&self, owner: &impl Resource) -> Result<Vec<K>, Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = crate::Gvk::of::<K>();
        let meta = owner.meta();
        let (namespace, uid) = (meta.namespace.as_deref(), meta.uid.as_deref());
        let items = (self.host).children(&kind, namespace.unwrap_or(""), uid.unwrap_or(""));
        parse_each(items, || format!("children of kind {}", kind.kind))
    }

    /// A database the operator granted and the manifest declares as `sql:<database>`.
    pub fn sql(&self, database: &str) -> Database<'a> {
        Database {
            host: self.host,
            name: database.into(),
        }
    }
}

/// Each object a read returned, deserialized into `T`; a failed read or an object that does not
/// fit is a retryable error saying `what` was read.
fn parse_each<T: DeserializeOwned>(
    items: Result<Vec<String>, String>,
    what: impl Fn() -> String,
) -> Result<Vec<T>, Error> {
    let items = items.map_err(Error::retryable)?;
    (items.iter())
        .map(|json| {
            serde_json::from_str(json).map_err(|e| Error::retryable(format!("{}: {e}", what())))
        })
        .collect()
}

/// A granted database, from [`Context::sql`].
pub struct Database<'a> {
    pub(crate) host: &'a dyn Host,
    pub(crate) name: String,
}

impl Database<'_> {
    /// Runs one statement.
    pub fn execute(&self, statement: Statement) -> Result<Rows, SqlError> {
        let mut rows = self.transaction(&[statement])?;
        rows.pop().ok_or_else(|| SqlError {
            message: "the host returned no result for the statement".into(),
            sqlstate: None,
            transient: false,
        })
    }

    /// Runs statements in order in one transaction: all take effect or none.
    pub fn transaction(&self, statements: &[Statement]) -> Result<Vec<Rows>, SqlError> {
        self.host.sql(&self.name, statements)
    }
}
