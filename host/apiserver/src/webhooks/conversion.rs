//! CRD conversion webhooks, called as kube-apiserver's `webhookConverter` calls them
//! (`apiextensions-apiserver/pkg/apiserver/conversion`): the objects of a custom resource that
//! are not at the version asked for are sent, all in one ConversionReview, to the webhook its
//! CRD's `spec.conversion` names; the answer counts only if it is a review of the same uid that
//! succeeded, with one object per object sent, each of the version asked for, of the same kind,
//! name, namespace and uid. A converted object keeps its original metadata but for its labels
//! and annotations, which the webhook may change (checked as kube checks them).
//!
//! Every failure is the request's error, worded as kube's (`conversion webhook for
//! <group>/<version>, Kind=<kind> failed: ...`): a 500 with no reason, which kubectl prints as
//! `Error from server: ...`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmctrl_core::validation as rules;

use super::Webhooks;
use super::call::MAX_ANSWER;
use super::config;
use crate::catalog::Resource;
use crate::json::str_at;
use crate::status::{ApiError, ApiResult};

/// How long a conversion webhook may take (kube's webhook clients' default timeout).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The review versions this server sends, in its order of preference.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// What is converted: one object (a get, a write, a watch event) or a list's items, which kube
/// words its errors for differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Batch {
    One,
    List,
}

impl Webhooks {
    /// `objects` at `version` of `res`: those at another version converted by its CRD's
    /// webhook, in one review; the rest (and everything of a resource without a webhook, whose
    /// versions differ only in `apiVersion`, which rendering sets) as they are.
    pub(crate) async fn convert(
        &self,
        res: &Resource,
        version: &str,
        objects: Vec<Arc<Value>>,
        batch: Batch,
    ) -> ApiResult<Vec<Arc<Value>>> {
        let Some(webhook) = res.conversion.as_deref() else {
            return Ok(objects);
        };
        let desired = res.api_version(version);
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| needs_conversion(&objects[i], &res.kind, &desired))
            .collect();
        if pending.is_empty() {
            return Ok(objects);
        }
        let subject = subject(res, &objects[pending[0]], batch);
        let fail = |why: String| conversion_failed(&subject, why);
        let sent: Vec<&Value> = pending.iter().map(|&i| &*objects[i]).collect();
        let converted = self
            .review(webhook, &desired, &sent)
            .await
            .map_err(|why| fail(format!("failed: {why}")))?;
        if converted.len() != sent.len() {
            return Err(fail(format!(
                "returned {} objects, expected {}",
                converted.len(),
                sent.len()
            )));
        }
        let mut out = objects.clone();
        for (n, (i, mut object)) in pending.into_iter().zip(converted).enumerate() {
            let original = &*objects[i];
            let at = match batch {
                Batch::One => "object at index 0".to_string(),
                Batch::List => format!("converted object at index {n}"),
            };
            checked(original, &object, &desired)
                .map_err(|why| fail(format!("returned invalid {at}: {why}")))?;
            restore_metadata(original, &mut object).map_err(|why| {
                let at = match batch {
                    Batch::One => String::new(),
                    Batch::List => format!(" in object at index {n}"),
                };
                fail(format!("returned invalid metadata{at}: {why}"))
            })?;
            out[i] = Arc::new(object);
        }
        Ok(out)
    }

    /// One object at `version` of `res` ([`Webhooks::convert`] of one).
    pub(crate) async fn convert_one(
        &self,
        res: &Resource,
        version: &str,
        object: Value,
    ) -> ApiResult<Value> {
        let desired = res.api_version(version);
        if res.conversion.is_none() || !needs_conversion(&object, &res.kind, &desired) {
            return Ok(object);
        }
        let mut out = self
            .convert(res, version, vec![Arc::new(object)], Batch::One)
            .await?;
        let converted = out.pop().unwrap_or_default();
        Ok(Arc::unwrap_or_clone(converted))
    }

    /// Sends `objects` to the webhook to be converted to `desired`: the converted objects, or
    /// why the call or its answer failed.
    async fn review(
        &self,
        webhook: &Value,
        desired: &str,
        objects: &[&Value],
    ) -> Result<Vec<Value>, String> {
        let offered = (webhook["conversionReviewVersions"].as_array())
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        let review_version = offered
            .into_iter()
            .find(|v| REVIEW_VERSIONS.contains(v))
            .ok_or("no supported conversion review versions")?;
        let uid = uuid::Uuid::new_v4().to_string();
        let request = json!({
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        });
        let client = config::client(&webhook["clientConfig"]);
        let body = serde_json::to_vec(&request).unwrap_or_default();
        let max = MAX_ANSWER.saturating_mul(objects.len().max(1));
        let answer = self.clients.post(&client, TIMEOUT, body, max).await?;
        converted_objects(&answer, &uid, review_version)
    }
}

/// Whether `object` must be sent to be at `desired`: it is an object of the `kind` converted
/// (not a `Status` a delete answered), at another version, and holds more than its type (kube
/// converts an empty object without calling the webhook).
fn needs_conversion(object: &Value, kind: &str, desired: &str) -> bool {
    let at = object["apiVersion"].as_str().unwrap_or_default();
    let empty =
        (object.as_object()).is_none_or(|m| m.keys().all(|k| k == "apiVersion" || k == "kind"));
    object["kind"] == kind && at != desired && !empty
}

/// What kube names in a conversion error: the first object's group, version and kind, or for
/// a list its list kind.
fn subject(res: &Resource, first: &Value, batch: Batch) -> String {
    let api_version = first["apiVersion"].as_str().unwrap_or_default();
    let kind = match batch {
        Batch::One => &res.kind,
        Batch::List => &res.list_kind,
    };
    format!("{api_version}, Kind={kind}")
}

/// The error of a failed conversion: a 500 without a reason, as kube answers an error that is
/// not an API status.
fn conversion_failed(subject: &str, why: String) -> ApiError {
    ApiError::new(500, "", format!("conversion webhook for {subject} {why}"))
}

/// The converted objects of a ConversionReview answer, checked as kube's
/// `getConvertedObjectsFromResponse` checks them (a v1beta1 answer's type and uid are not).
fn converted_objects(body: &[u8], uid: &str, review_version: &str) -> Result<Vec<Value>, String> {
    let answer: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if review_version == "v1" {
        let (api_version, kind) = (str_at(&answer, "/apiVersion"), str_at(&answer, "/kind"));
        if (api_version, kind) != ("apiextensions.k8s.io/v1", "ConversionReview") {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {api_version}, Kind={kind}"
            ));
        }
    }
    let Some(response) = answer.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    let got = str_at(response, "/uid");
    if review_version == "v1" && got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let status = str_at(response, "/result/status");
    if status != "Success" {
        let message = str_at(response, "/result/message");
        if !message.is_empty() {
            return Err(message.to_string());
        }
        return Err(format!(
            "response.result.status was '{status}', not 'Success'"
        ));
    }
    Ok((response["convertedObjects"].as_array())
        .cloned()
        .unwrap_or_default())
}

/// kube's checks of one converted object: the version asked for, and the original's kind,
/// name, namespace and uid.
fn checked(original: &Value, converted: &Value, desired: &str) -> Result<(), String> {
    if !converted.is_object() {
        return Err("the converted object is not an object".into());
    }
    let got = str_at(converted, "/apiVersion");
    if got != desired {
        return Err(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        ));
    }
    let (want, got) = (str_at(original, "/kind"), str_at(converted, "/kind"));
    if want != got {
        return Err(format!("invalid kind (expected {want}, received {got})"));
    }
    for (field, says) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let pointer = format!("/metadata/{field}");
        let (want, got) = (str_at(original, &pointer), str_at(converted, &pointer));
        if want != got {
            return Err(format!("must have the same {says}: {want} != {got}"));
        }
    }
    Ok(())
}

/// The original's metadata in the converted object, but for the labels and annotations the
/// webhook answered (kube's `restoreObjectMeta`), checked as a write's would be when changed.
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let Some(answered) = converted.get("metadata").cloned() else {
        return Err("missing metadata in converted object".into());
    };
    if !answered.is_object() {
        return Err("invalid metadata in converted object: not an object".into());
    }
    let mut metadata = original
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for field in ["labels", "annotations"] {
        let given = &answered[field];
        if given.is_null() {
            if let Some(m) = metadata.as_object_mut() {
                m.remove(field);
            }
            continue;
        }
        let Some(entries) = given.as_object() else {
            return Err(format!(
                "invalid metadata.{field} in converted object: not a map"
            ));
        };
        if let Some((k, _)) = entries.iter().find(|(_, v)| !v.is_string()) {
            return Err(format!(
                "metadata.{field}[{k}] must be a string in converted object"
            ));
        }
        if *given != metadata[field] {
            let meta = json!({ field: given });
            let errors = match field {
                "labels" => rules::labels(&meta),
                _ => rules::annotations(&meta),
            };
            if !errors.is_empty() {
                return Err(aggregate(&errors));
            }
        }
        metadata[field] = given.clone();
    }
    converted["metadata"] = metadata;
    Ok(())
}

/// Field errors as Go's `ToAggregate` prints them: one as itself, several in brackets.
fn aggregate(errors: &[rules::FieldError]) -> String {
    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
    match all.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", all.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original() -> Value {
        json!({"apiVersion": "example.com/v1alpha1", "kind": "Box",
               "metadata": {"name": "a", "namespace": "ns", "uid": "u1",
                            "resourceVersion": "7", "labels": {"x": "1"}},
               "spec": {"size": 2}})
    }

    #[test]
    fn converted_objects_keep_their_metadata_but_for_labels_and_annotations() {
        let mut converted = json!({"apiVersion": "example.com/v1beta1", "kind": "Box",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "0",
                         "labels": {"y": "2"}, "annotations": {"n": "m"}},
            "spec": {"replicas": 2}});
        checked(&original(), &converted, "example.com/v1beta1").unwrap();
        restore_metadata(&original(), &mut converted).unwrap();
        assert_eq!(converted["metadata"]["resourceVersion"], "7");
        assert_eq!(converted["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(converted["metadata"]["annotations"], json!({"n": "m"}));
        assert_eq!(converted["spec"], json!({"replicas": 2}));
    }

    #[test]
    fn a_converted_object_is_refused_as_kube_refuses_it() {
        let wrong = |patch: Value| {
            let mut c = original();
            c["apiVersion"] = json!("example.com/v1beta1");
            json_patch::merge(&mut c, &patch);
            checked(&original(), &c, "example.com/v1beta1").unwrap_err()
        };
        assert_eq!(
            wrong(json!({"apiVersion": "example.com/v2"})),
            "invalid groupVersion (expected example.com/v1beta1, received example.com/v2)"
        );
        assert_eq!(
            wrong(json!({"kind": "Crate"})),
            "invalid kind (expected Box, received Crate)"
        );
        assert_eq!(
            wrong(json!({"metadata": {"uid": "u2"}})),
            "must have the same UID: u1 != u2"
        );
        let mut bad_label = original();
        bad_label["metadata"]["labels"] = json!({"a b": "c"});
        let why = restore_metadata(&original(), &mut bad_label).unwrap_err();
        assert!(
            why.starts_with("metadata.labels: Invalid value: \"a b\""),
            "{why}"
        );
    }

    #[test]
    fn a_review_answer_counts_only_when_it_is_the_review_asked_for() {
        let answer = |v: Value| converted_objects(v.to_string().as_bytes(), "u", "v1");
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{}]}});
        assert_eq!(answer(ok.clone()).unwrap().len(), 1);
        let mut other = ok.clone();
        other["response"]["uid"] = json!("v");
        assert_eq!(
            answer(other).unwrap_err(),
            r#"expected response.uid="u", got "v""#
        );
        let mut failed = ok.clone();
        failed["response"]["result"] = json!({"status": "Failure", "message": "no way"});
        assert_eq!(answer(failed).unwrap_err(), "no way");
        let mut typed = ok;
        typed["kind"] = json!("AdmissionReview");
        assert!(
            answer(typed)
                .unwrap_err()
                .starts_with("expected webhook response of")
        );
        assert!(!needs_conversion(
            &json!({"apiVersion": "g/v1", "kind": "K"}),
            "K",
            "g/v2"
        ));
        let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Success"});
        assert!(!needs_conversion(&status, "K", "g/v2"));
    }
}
