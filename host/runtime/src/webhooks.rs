//! A plugin's webhooks (contract 0.3.1's optional `webhooks` export): what it declared at
//! load, and each call in a fresh sandbox, as a reconcile runs, under the same deadline,
//! memory cap and cache scope; the answer bounded and about the kind the plugin reconciles.

use std::sync::Arc;

use wasmtime::Store;

use crate::imports::State;
use crate::plugin::bindings::hooks;
use crate::view::{EmptyView, View};
use crate::{Error, ErrorKind, Exports, Plugin, Pre};

impl Exports {
    /// The instance's `webhooks` export, by the indices found at load.
    fn webhooks(
        &self,
        store: &mut Store<State>,
        indices: &hooks::GuestIndices,
    ) -> wasmtime::Result<hooks::Guest> {
        match self {
            Exports::Current { instance, .. } => indices.load(store, instance),
            Exports::Previous(_) => Err(wasmtime::format_err!("no `webhooks` export")),
        }
    }
}

impl Plugin {
    fn webhook_indices(&self) -> Option<&hooks::GuestIndices> {
        match &self.pre {
            Pre::Current { webhooks, .. } => webhooks.as_ref(),
            Pre::Previous(_) => None,
        }
    }

    /// At load: what the plugin serves, asked under its settings; none without the export.
    pub(crate) fn call_declare(&self) -> Result<Option<hooks::Declaration>, String> {
        let Some(indices) = self.webhook_indices() else {
            return Ok(None);
        };
        let settings = self.settings.clone();
        let view: Arc<dyn View> = Arc::new(EmptyView);
        let declared = self.call("declare", None, view, |exports, store| {
            exports
                .webhooks(store, indices)?
                .call_declare(store, &settings)
        });
        match declared {
            Ok(Ok(d)) => Ok(Some(d)),
            Ok(Err(message)) => Err(format!("declare() rejected the settings: {message}")),
            Err(kind) => Err(format!("declare(): {kind}")),
        }
    }

    /// What the plugin serves as webhooks; `None` when it serves none.
    pub fn webhooks(&self) -> Option<&hooks::Declaration> {
        self.webhooks
            .as_ref()
            .filter(|d| !d.validates.is_empty() || d.defaults || !d.converts.is_empty())
    }

    /// Asks the plugin's validating webhook. Blocking, as [`Plugin::reconcile`].
    pub fn validate(
        &self,
        request: hooks::AdmissionRequest,
        view: Arc<dyn View>,
    ) -> Result<hooks::AdmissionResponse, Error> {
        let declared = self.webhooks.as_ref().map(|d| d.validates.as_slice());
        let admits = declared.is_some_and(|ops| ops.contains(&request.operation));
        self.admit(
            request,
            view,
            admits,
            "validate",
            |guest, store, request| guest.call_validate(store, request),
        )
    }

    /// Asks the plugin's defaulting webhook: its answer's `patched` is the defaulted object.
    pub fn mutate(
        &self,
        request: hooks::AdmissionRequest,
        view: Arc<dyn View>,
    ) -> Result<hooks::AdmissionResponse, Error> {
        let defaults = self.webhooks.as_ref().is_some_and(|d| d.defaults);
        let admits = defaults
            && matches!(
                request.operation,
                hooks::Operation::Create | hooks::Operation::Update
            );
        self.admit(request, view, admits, "default", |guest, store, request| {
            guest.call_mutate(store, request)
        })
    }

    fn admit(
        &self,
        mut request: hooks::AdmissionRequest,
        view: Arc<dyn View>,
        declared: bool,
        what: &str,
        call: impl FnOnce(
            &hooks::Guest,
            &mut Store<State>,
            &hooks::AdmissionRequest,
        ) -> wasmtime::Result<Result<hooks::AdmissionResponse, String>>,
    ) -> Result<hooks::AdmissionResponse, Error> {
        let key = crate::key(&request.namespace, &request.name);
        let fail = |kind| self.error(&key, kind);
        let watched = self.manifest.kind();
        if request.kind.group != watched.group || request.kind.kind != watched.kind {
            return Err(fail(ErrorKind::Webhook(format!(
                "it serves webhooks for {}, not {}",
                watched.kind, request.kind.kind
            ))));
        }
        if !declared {
            return Err(fail(ErrorKind::Webhook(format!(
                "it does not {what} {:?} requests",
                request.operation
            ))));
        }
        let Some(indices) = self.webhook_indices() else {
            return Err(fail(ErrorKind::Webhook("it has no webhooks".into())));
        };
        request.settings.clone_from(&self.settings);
        let answered = self.call(&key, self.scope.clone(), view, |exports, store| {
            let guest = exports.webhooks(store, indices)?;
            call(&guest, store, &request)
        });
        let response = match answered.map_err(&fail)? {
            Ok(r) => r,
            Err(message) => {
                return Err(fail(ErrorKind::Plugin {
                    message,
                    retryable: false,
                }));
            }
        };
        let size = response.message.len()
            + response.warnings.iter().map(String::len).sum::<usize>()
            + response.patched.as_ref().map_or(0, String::len);
        let limit = self.runtime.inner.config.max_result_bytes;
        if size > limit {
            return Err(fail(ErrorKind::ResultTooLarge { size, limit }));
        }
        Ok(response)
    }

    /// Converts `objects` (JSON) to `desired_api_version` with the plugin's conversion webhook,
    /// checking that it answers one object of its kind at that version for each.
    pub fn convert(
        &self,
        desired_api_version: &str,
        objects: Vec<String>,
        view: Arc<dyn View>,
    ) -> Result<Vec<String>, Error> {
        let fail = |kind| self.error("convert", kind);
        let declared = self.webhooks.as_ref().map(|d| d.converts.as_slice());
        let watched = self.manifest.kind();
        let (group, version) = desired_api_version
            .rsplit_once('/')
            .unwrap_or(("", desired_api_version));
        if group != watched.group || !declared.is_some_and(|v| v.iter().any(|d| d == version)) {
            return Err(fail(ErrorKind::Webhook(format!(
                "it does not convert {} to {desired_api_version}",
                watched.kind
            ))));
        }
        let Some(indices) = self.webhook_indices() else {
            return Err(fail(ErrorKind::Webhook("it has no webhooks".into())));
        };
        let count = objects.len();
        let settings = self.settings.clone();
        let answered = self.call("convert", self.scope.clone(), view, |exports, store| {
            let guest = exports.webhooks(store, indices)?;
            guest.call_convert(store, &settings, desired_api_version, &objects)
        });
        let converted = match answered.map_err(&fail)? {
            Ok(c) => c,
            Err(message) => {
                return Err(fail(ErrorKind::Plugin {
                    message,
                    retryable: false,
                }));
            }
        };
        let size: usize = converted.iter().map(String::len).sum();
        let limit = self.runtime.inner.config.max_result_bytes;
        if size > limit {
            return Err(fail(ErrorKind::ResultTooLarge { size, limit }));
        }
        if converted.len() != count {
            return Err(fail(ErrorKind::Webhook(format!(
                "asked to convert {count} objects, it answered {}",
                converted.len()
            ))));
        }
        Ok(converted)
    }
}
