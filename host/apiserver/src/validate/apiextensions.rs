//! `apiextensions.k8s.io`'s validation of a CRD's `spec.conversion`
//! (`validateCustomResourceConversion`), reported at the field names kube-apiserver reports
//! (its internal type's: `spec.conversion.webhookClientConfig`, not v1's
//! `spec.conversion.webhook.clientConfig`).

use serde_json::Value;
use wasmctrl_core::validation::FieldError;

use super::admissionregistration::{client_config, known_review_versions};
use super::{Errors, one_of};

/// A CRD spec's `conversion`: `None`, or `Webhook` with a client config and the review
/// versions it speaks (and then no `preserveUnknownFields`).
pub(crate) fn conversion(spec: &Value, errs: &mut Errors) {
    let Some(conversion) = spec.get("conversion").filter(|c| !c.is_null()) else {
        return;
    };
    let strategy = conversion["strategy"].as_str().unwrap_or_default();
    one_of(
        errs,
        "spec.conversion.strategy",
        strategy,
        &["None", "Webhook"],
    );
    let webhook = conversion.get("webhook").filter(|w| !w.is_null());
    let client = webhook
        .and_then(|w| w.get("clientConfig"))
        .filter(|c| !c.is_null());
    let versions = webhook
        .and_then(|w| w["conversionReviewVersions"].as_array())
        .filter(|v| !v.is_empty());
    const CLIENT: &str = "spec.conversion.webhookClientConfig";
    const VERSIONS: &str = "spec.conversion.conversionReviewVersions";
    if strategy != "Webhook" {
        let forbidden = "should not be set when strategy is not set to Webhook";
        if client.is_some() {
            errs.push(FieldError::forbidden(CLIENT, forbidden));
        }
        if versions.is_some() {
            errs.push(FieldError::forbidden(VERSIONS, forbidden));
        }
        return;
    }
    if spec["preserveUnknownFields"].as_bool() == Some(true) {
        errs.push(FieldError::invalid(
            "spec.conversion.strategy",
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    match client {
        None => errs.push(FieldError::required(
            CLIENT,
            "required when strategy is set to Webhook",
        )),
        Some(cc) => client_config(cc, CLIENT, errs),
    }
    match versions {
        None => errs.push(FieldError::required(VERSIONS, "")),
        Some(v) => known_review_versions(v, VERSIONS, errs),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(given: Value) -> Vec<String> {
        let mut errs = Errors::new();
        conversion(&json!({ "conversion": given }), &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_webhook_conversion_needs_a_client_and_a_known_review_version() {
        assert_eq!(
            errors(json!({"strategy": "Webhook"})),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ]
        );
        let webhook = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "http://example.com/convert"},
            "conversionReviewVersions": ["v2"]}});
        assert_eq!(
            errors(webhook),
            [
                "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
            ]
        );
        let fine = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/convert"}},
            "conversionReviewVersions": ["v1"]}});
        assert_eq!(errors(fine), Vec::<String>::new());
    }

    #[test]
    fn no_conversion_takes_no_webhook() {
        assert_eq!(
            errors(json!({"strategy": "None", "webhook": {
                "clientConfig": {"url": "https://example.com"},
                "conversionReviewVersions": ["v1"]}})),
            [
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]
        );
        assert_eq!(
            errors(json!({"strategy": "Sometimes"})),
            [
                "spec.conversion.strategy: Unsupported value: \"Sometimes\": supported values: \"None\", \"Webhook\""
            ]
        );
    }
}
