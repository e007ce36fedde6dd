//! How a write is sent: skipped when unchanged, remembered when done, its errors classified,
//! its kind resolved to a resource and an API of the right client.

use super::*;
use crate::requests::{BuildRequest, send_text};

impl Applier {
    /// Whether the same intent was written last and the target (at `cached` in the cache
    /// covering it, `None` when no cache does) has not changed since. Without a cache we cannot
    /// see drift and trust the intent hash alone.
    pub(super) fn unchanged(
        &self,
        plugin: &str,
        to: &WrittenTo,
        intent_hash: u64,
        cached: Option<&str>,
    ) -> bool {
        let Some(last) = self.last(plugin, to) else {
            return false;
        };
        match cached {
            Some(cached) => last.holds(intent_hash, cached),
            None => last.hash == intent_hash,
        }
    }

    /// Sends the write `build` makes for `api`'s resource; returns the resourceVersion it
    /// produced. `verb` names the request for the client's tracing, as `Api`'s methods do.
    pub(super) async fn write(
        &self,
        api: &Api<DynamicObject>,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<String, kube::Error> {
        let response: Response = self.send(api, verb, build).await?;
        Ok(response.metadata.resource_version.unwrap_or_default())
    }

    /// Sends a request built against `api` and reads the response as `R`.
    pub(super) async fn send<R: serde::de::DeserializeOwned>(
        &self,
        api: &Api<DynamicObject>,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<R, kube::Error> {
        let text = self.send_text(api, verb, build).await?;
        serde_json::from_str(&text).map_err(kube::Error::SerdeError)
    }

    /// Sends a request built against `api` and returns the response's body, for a reader that
    /// parses only part of it.
    pub(super) async fn send_text(
        &self,
        api: &Api<DynamicObject>,
        verb: &'static str,
        build: impl BuildRequest,
    ) -> Result<String, kube::Error> {
        // The client the Api was made with: the plugin's.
        let client = api.clone().into_client();
        send_text(&client, api.resource_url(), verb, build).await
    }

    pub(super) fn remember(
        &self,
        plugin: &str,
        to: WrittenTo,
        hash: u64,
        before: Option<String>,
        after: String,
    ) {
        let write = Write {
            hash,
            before: before.unwrap_or_default(),
            after,
        };
        self.record(plugin, to, write);
    }

    pub(super) fn map<T>(
        &self,
        result: Result<T, kube::Error>,
        label: &str,
        verb: &'static str,
    ) -> Result<T, Error> {
        result.map_err(|e| self.classify(e, label, verb, false))
    }

    pub(super) fn classify(
        &self,
        e: kube::Error,
        label: &str,
        verb: &'static str,
        preconditions: bool,
    ) -> Error {
        match is_conflict(&e, preconditions) {
            Some(status) => Error::Conflict {
                target: label.to_string(),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            None => Error::Api {
                target: label.to_string(),
                verb,
                error: e,
            },
        }
    }

    /// A kind's resource and whether it is namespaced, discovered once: workers that need the
    /// same kind at once wait for one discovery request instead of each sending their own. A
    /// failed discovery is not kept; the next caller tries again.
    pub(super) async fn resource(&self, gvk: &Gvk) -> Result<(ApiResource, bool), Error> {
        let cell = lock(&self.resources)
            .entry(gvk.clone())
            .or_default()
            .clone();
        let discovered = cell
            .get_or_try_init(|| async {
                let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk.into())
                    .await
                    .map_err(|error| Error::Discovery {
                        kind: gvk.to_string(),
                        error,
                    })?;
                Ok::<_, Error>((resource, caps.scope == Scope::Namespaced))
            })
            .await?;
        Ok(discovered.clone())
    }

    /// The API for a target; a namespaced target without a namespace defaults to the
    /// reconciled object's namespace.
    pub(super) async fn api_for(
        &self,
        target: &Target,
        subject: &Subject<'_>,
    ) -> Result<(Api<DynamicObject>, String, Gvk), Error> {
        let gvk = target.gvk();
        let (resource, namespaced) = self.resource(&gvk).await?;
        let client = self.client(&subject.manifest.name);
        if !namespaced {
            return Ok((Api::all_with(client, &resource), String::new(), gvk));
        }
        let namespace = if target.namespace.is_empty() {
            subject.key.namespace().to_owned()
        } else {
            target.namespace.clone()
        };
        Ok((
            Api::namespaced_with(client, &namespace, &resource),
            namespace,
            gvk,
        ))
    }

    pub(super) async fn subject_api(
        &self,
        subject: &Subject<'_>,
    ) -> Result<(Api<DynamicObject>, String), Error> {
        let gvk = subject.manifest.kind();
        let (resource, namespaced) = self.resource(gvk).await?;
        let label = target_label(gvk, subject.key.namespace(), subject.key.name());
        let client = self.client(&subject.manifest.name);
        let api = if namespaced {
            Api::namespaced_with(client, subject.key.namespace(), &resource)
        } else {
            Api::all_with(client, &resource)
        };
        Ok((api, label))
    }
}
