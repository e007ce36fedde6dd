//! One request per kind of intent: server-side apply, patches, deletes, status, finalizers,
//! Events.

use super::*;

impl Applier {
    /// Server-side applies a whole object with the plugin's field manager, unless the cache
    /// shows what the last apply of the same intent left.
    pub(super) async fn server_side_apply(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        object: &Value,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        // Serialized once: the same text is hashed and sent.
        let body = if !namespace.is_empty() && object["metadata"]["namespace"].is_null() {
            let mut object = object.clone();
            object["metadata"]["namespace"] = json!(namespace);
            object.to_string()
        } else {
            object.to_string()
        };
        let label = target_label(&gvk, &namespace, &target.name);
        let to = WrittenTo::object(&gvk, &namespace, &target.name);
        let intent_hash = hash_of(&body);
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        let before = cached.as_ref().map(Cached::version);
        if self.unchanged(plugin, &to, intent_hash, before.as_deref()) {
            return Ok(false);
        }
        let params = PatchParams::apply(&subject.manifest.field_manager()).force();
        let body = RawValue::from_string(body).map_err(|e| Error::Malformed {
            target: label.clone(),
            message: e.to_string(),
        })?;
        let result = self
            .write(&api, "patch", |r| {
                r.patch(&target.name, &params, &Patch::Apply(&body))
            })
            .await;
        let after = self.map(result, &label, "apply")?;
        if changed(before.as_deref(), &after)
            && let Some(cached) = cached
        {
            add_echo(echoes, cached.into_echo(), Some(&after));
        }
        self.remember(plugin, to, intent_hash, before, after);
        Ok(true)
    }

    /// A merge patch, or a JSON Patch whose `test` operations are preconditions.
    pub(super) async fn patch(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        patch: Patching<'_>,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        let label = target_label(&gvk, &namespace, &target.name);
        let to = WrittenTo::object(&gvk, &namespace, &target.name);
        let intent_hash = match patch {
            Patching::Merge(patch) => hash_of(&(false, patch.to_string())),
            Patching::Json(ops) => hash_of(&(true, serde_json::to_string(ops).unwrap_or_default())),
        };
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        let before = cached.as_ref().map(Cached::version);
        if self.unchanged(plugin, &to, intent_hash, before.as_deref()) {
            return Ok(false);
        }
        let params = PatchParams {
            field_manager: Some(subject.manifest.field_manager()),
            ..Default::default()
        };
        let (result, preconditions) = match patch {
            Patching::Json(ops) => {
                let patch = Patch::<()>::Json(ops.clone());
                let result = self
                    .write(&api, "patch", |r| r.patch(&target.name, &params, &patch))
                    .await;
                (result, has_test(ops))
            }
            Patching::Merge(patch) => {
                let patch = Patch::Merge(patch);
                let result = self
                    .write(&api, "patch", |r| r.patch(&target.name, &params, &patch))
                    .await;
                (result, false)
            }
        };
        let after = result.map_err(|e| self.classify(e, &label, "patch", preconditions))?;
        if changed(before.as_deref(), &after)
            && let Some(cached) = cached
        {
            add_echo(echoes, cached.into_echo(), Some(&after));
        }
        self.remember(plugin, to, intent_hash, before, after);
        Ok(true)
    }

    /// Deletes with the plugin's propagation policy; an object already gone, or already being
    /// deleted, needs no request.
    pub(super) async fn delete(
        &self,
        subject: &Subject<'_>,
        target: &Target,
        propagation: wit::Propagation,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let (api, namespace, gvk) = self.api_for(target, subject).await?;
        let label = target_label(&gvk, &namespace, &target.name);
        let cached = self.cached(&subject.manifest.name, &gvk, &namespace, &target.name);
        if cached
            .as_ref()
            .is_some_and(|c| c.entry.as_ref().is_none_or(|e| e.deleting))
        {
            return Ok(false);
        }
        let params = match propagation {
            wit::Propagation::Background => DeleteParams::background(),
            wit::Propagation::Foreground => DeleteParams::foreground(),
            wit::Propagation::Orphan => DeleteParams::orphan(),
        };
        match api.delete(&target.name, &params).await {
            Ok(_) => {
                // Gone, or marked for deletion: either way a new version.
                if let Some(cached) = cached {
                    add_echo(echoes, cached.into_echo(), None);
                }
                Ok(true)
            }
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(self.classify(e, &label, "delete", false)),
        }
    }

    /// Replaces the reconciled object's status through the status subresource, and says when
    /// the server pruned fields of it.
    pub(super) async fn write_status(
        &self,
        subject: &Subject<'_>,
        status: &Value,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let plugin = subject.manifest.name.as_str();
        let Some(object) = subject.object else {
            return Ok(false);
        };
        // Compact with sorted keys, as the cache holds objects and the API server writes them.
        let status_json = status.to_string();
        if status_of(&object.json) == Some(status_json.as_str()) {
            return Ok(false);
        }
        let status_hash = hash_of(&status_json);
        let (namespace, name) = (object.key.namespace(), object.key.name());
        let to = WrittenTo::status(subject.manifest.kind(), namespace, name);
        if self
            .last(plugin, &to)
            .is_some_and(|w| w.holds(status_hash, &object.resource_version.to_string()))
        {
            return Ok(false);
        }
        let (api, label) = self.subject_api(subject).await?;
        let params = PatchParams {
            field_manager: Some(subject.manifest.field_manager()),
            ..Default::default()
        };
        // One operation replacing the whole status, written around the text above: a
        // `json_patch::Patch` would hold a copy of the status and serialize it again. kube builds
        // the request (URL, query, content type) for an empty patch, whose body this replaces.
        let body =
            format!(r#"[{{"op":"add","path":"/status","value":{status_json}}}]"#).into_bytes();
        let empty = Patch::<()>::Json(json_patch::Patch(Vec::new()));
        let result = self
            .send_text(&api, "patch_subresource", |r| {
                r.patch_subresource("status", object.key.name(), &params, &empty)
                    .map(|request| request.map(|_| body))
            })
            .await;
        let text = self.map(result, &label, "update status")?;
        let parsed = serde_json::from_str(&text).map_err(kube::Error::SerdeError);
        let written: StatusResponse<'_> = self.map(parsed, &label, "update status")?;
        // The server writes a status back as it was sent unless it pruned or rewrote some of
        // it: only then is it parsed and compared field by field.
        let stored = written.status.map(RawValue::get);
        if stored != Some(status_json.as_str()) {
            let stored = stored.and_then(|s| serde_json::from_str(s).ok());
            let pruned = pruned_fields(status, stored.as_ref().unwrap_or(&Value::Null));
            if !pruned.is_empty() {
                self.report_pruned(subject, &label, &pruned).await;
            }
        }
        let after = written.metadata.resource_version.unwrap_or_default();
        let before = object.resource_version.to_string();
        if changed(Some(&before), &after)
            && let Some(echo) = subject.echo()
        {
            add_echo(echoes, echo, Some(&after));
        }
        self.remember(plugin, to, status_hash, Some(before), after);
        Ok(true)
    }

    /// Adds (`adding`) or removes a finalizer of the reconciled object with a JSON Patch whose
    /// `test` makes it act only on the list it saw.
    pub(super) async fn write_finalizer(
        &self,
        subject: &Subject<'_>,
        finalizer: &str,
        adding: bool,
        echoes: &mut Vec<Echo>,
    ) -> Result<bool, Error> {
        let Some(object) = subject.object else {
            return Ok(false);
        };
        let finalizers = object.meta().finalizers;
        let present = finalizers.iter().position(|f| f == finalizer);
        let ops = match (adding, present) {
            (true, Some(_)) | (false, None) => return Ok(false),
            // Same preconditions as kube-runtime's finalizer helper: act only on the
            // list we saw, so a concurrent writer's finalizer is never lost.
            (true, None) if finalizers.is_empty() => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
            ]),
            (true, None) => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
            ]),
            (false, Some(i)) => json!([
                {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer},
                {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
            ]),
        };
        let (api, label) = self.subject_api(subject).await?;
        let ops: json_patch::Patch = serde_json::from_value(ops).map_err(|e| Error::Malformed {
            target: label.clone(),
            message: e.to_string(),
        })?;
        let result = api
            .patch(
                object.key.name(),
                &PatchParams::default(),
                &Patch::<()>::Json(ops),
            )
            .await;
        match result {
            Err(e) if !adding && is_not_found(&e) => Ok(false),
            Err(e) => Err(self.classify(e, &label, "patch finalizers", true)),
            Ok(patched) => {
                // Adding or removing a finalizer always makes a new version.
                if let Some(echo) = subject.echo() {
                    let after = patched.metadata.resource_version;
                    add_echo(echoes, echo, after.as_deref());
                }
                Ok(true)
            }
        }
    }

    /// Says that the API server pruned status fields the plugin wrote, in the log and as a
    /// Warning Event on the object: without it a plugin's new status field just never appears.
    pub(super) async fn report_pruned(
        &self,
        subject: &Subject<'_>,
        label: &str,
        pruned: &[String],
    ) {
        let fields = pruned.join(", ");
        tracing::warn!(
            plugin.name = subject.manifest.name,
            object = label,
            %fields,
            "the API server pruned status fields the plugin wrote: its schema for the kind does not \
             declare them (is the installed CRD older than the plugin?)"
        );
        let note = format!(
            "the API server pruned status fields the plugin wrote, which the installed CRD does \
             not declare: {fields}; install the plugin's current CRD"
        );
        let note = Note {
            warning: true,
            reason: "StatusFieldsPruned",
            note: &note,
            action: "UpdateStatus",
        };
        // Best effort, like every event.
        let _ = self.event(subject, &note).await;
    }

    pub(super) async fn event(
        &self,
        subject: &Subject<'_>,
        note: &Note<'_>,
    ) -> Result<bool, Error> {
        let Some(object) = subject.object else {
            return Ok(false);
        };
        let plugin = subject.manifest.name.as_str();
        let kind = subject.manifest.kind();
        let namespace = object.key.namespace();
        // No resourceVersion: the recorder's series key compares whole references, and each
        // write moves the version on.
        let regarding = ObjectReference {
            api_version: Some(if kind.group.is_empty() {
                kind.version.clone()
            } else {
                format!("{}/{}", kind.group, kind.version)
            }),
            kind: Some(kind.kind.clone()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: Some(object.key.name().to_owned()),
            uid: Some(object.uid()),
            ..ObjectReference::default()
        };
        let controller = reporting_controller(plugin);
        let client = self.client(plugin);
        Ok(self
            .recorders
            .record(&client, &controller, plugin, &regarding, note)
            .await)
    }

    /// Records an Event about the host itself (its Pod: plugins loaded or refused), reported
    /// by controller [`HOST_CONTROLLER`]; best effort, as every event.
    pub async fn host_event(&self, regarding: &ObjectReference, note: &Note<'_>) -> bool {
        self.recorders
            .record(
                &self.client,
                HOST_CONTROLLER,
                HOST_CONTROLLER,
                regarding,
                note,
            )
            .await
    }
}
