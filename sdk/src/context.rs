//! What a reconcile can ask of the host: logging, reads from the host's cache, and SQL.

use serde::de::DeserializeOwned;

use crate::__private::bindings::wasmctrl::plugin::{cache, log, sql};
use crate::sql::{Database, Rows, SqlError, Statement};
use crate::{Error, Gvk, Level, NoSettings};

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

/// The real host: the component's imports.
pub(crate) struct Imports;

impl Host for Imports {
    fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        log::log(level.into(), message, &fields);
    }

    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<String>, String> {
        cache::get(&kind.into(), namespace, name)
    }

    fn list(&self, kind: &Gvk, namespace: &str, labels: &str) -> Result<Vec<String>, String> {
        cache::list(&kind.into(), namespace, labels)
    }

    fn children(
        &self,
        kind: &Gvk,
        namespace: &str,
        owner_uid: &str,
    ) -> Result<Vec<String>, String> {
        cache::children(&kind.into(), namespace, owner_uid)
    }

    fn sql(&self, database: &str, statements: &[Statement]) -> Result<Vec<Rows>, SqlError> {
        let statements: Vec<sql::Statement> = statements.iter().map(Into::into).collect();
        match sql::execute(database, &statements) {
            Ok(rows) => Ok(rows.into_iter().map(Into::into).collect()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Handed to [`crate::Reconciler::reconcile`]: the operator's settings, logging, typed cache
/// reads and SQL.
pub struct Context<'a, S = NoSettings> {
    host: &'a dyn Host,
    settings: &'a S,
}

impl<'a, S> Context<'a, S> {
    /// A context over any [`Host`] with these settings; plugins get theirs from the host or the
    /// test harness.
    pub fn new(host: &'a dyn Host, settings: &'a S) -> Self {
        Self { host, settings }
    }

    /// The operator's settings for this plugin, parsed by the SDK into the reconciler's
    /// [`Settings`](crate::Reconciler::Settings).
    pub fn settings(&self) -> &'a S {
        self.settings
    }

    /// Logs at `level` with key/value fields; the host adds plugin name and key.
    pub fn log(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        self.host.log(level, message, fields);
    }

    /// Logs at debug level.
    pub fn debug(&self, message: &str, fields: &[(&str, &str)]) {
        self.log(Level::Debug, message, fields);
    }

    /// Logs at info level.
    pub fn info(&self, message: &str, fields: &[(&str, &str)]) {
        self.log(Level::Info, message, fields);
    }

    /// Logs at warn level.
    pub fn warn(&self, message: &str, fields: &[(&str, &str)]) {
        self.log(Level::Warn, message, fields);
    }

    /// Reads one cached object of kind `K` (declared in the manifest): `ctx.get::<Pod>(ns,
    /// name)`. `Ok(None)` when it is not cached.
    ///
    /// A kind the manifest did not declare, or an object that does not fit `K`, is a retryable
    /// error naming the object.
    #[cfg(feature = "kube")]
    pub fn get<K>(&self, namespace: &str, name: &str) -> Result<Option<K>, Error>
    where
        K: kube_core::Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.get_dynamic(&crate::kube::gvk::<K>(), namespace, name)
    }

    /// Lists cached objects of kind `K` (declared in the manifest) in `namespace` (empty: all)
    /// matching the label selector `labels` (empty: all), in namespace/name order.
    #[cfg(feature = "kube")]
    pub fn list<K>(&self, namespace: &str, labels: &str) -> Result<Vec<K>, Error>
    where
        K: kube_core::Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.list_dynamic(&crate::kube::gvk::<K>(), namespace, labels)
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
    /// `Owns` index finds them. `K` must be declared (owned, or read) in the manifest; feature
    /// `kube`.
    ///
    /// ```ignore
    /// let jobs: Vec<Job> = ctx.children::<Job>(&cron_job.metadata)?;
    /// ```
    #[cfg(feature = "kube")]
    pub fn children<K>(&self, owner: &impl crate::Metadata) -> Result<Vec<K>, Error>
    where
        K: kube_core::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = crate::kube::gvk::<K>();
        let items = (self.host).children(&kind, owner.namespace(), owner.uid());
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
