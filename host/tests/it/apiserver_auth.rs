//! TokenReview on the embedded API server, through a real `kube::Client` (in-process): it names
//! the user behind the server's own tokens, as kube-apiserver does for a delegating server (the
//! host's secure `/metrics`), refuses any other token, is listed by discovery and is itself
//! behind RBAC.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

/// The status of a TokenReview of `token` (for `audiences`, when given) made by `client`.
async fn review(
    client: &kube::Client,
    token: &str,
    audiences: Option<&[&str]>,
) -> Result<TokenReviewStatus, kube::Error> {
    let review: TokenReview = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences},
    }))
    .unwrap();
    let api: Api<TokenReview> = Api::all(client.clone());
    let created = api.create(&PostParams::default(), &review).await?;
    Ok(created.status.unwrap())
}

/// Creates Namespace `monitoring` and ServiceAccount `monitoring/<name>`; its uid.
async fn service_account(client: &kube::Client, name: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = json!({"metadata": {"name": "monitoring"}});
    (namespaces.create(
        &PostParams::default(),
        &serde_json::from_value(namespace).unwrap(),
    ))
    .await
    .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "monitoring");
    let account = json!({"metadata": {"name": name}});
    let account = (accounts.create(
        &PostParams::default(),
        &serde_json::from_value(account).unwrap(),
    ))
    .await
    .unwrap();
    account.metadata.uid.unwrap()
}

#[tokio::test]
async fn token_review_names_the_user_of_a_service_account_token_and_refuses_a_bogus_one() {
    let server = ApiServer::new().unwrap();
    let admin = server.client();
    let uid = service_account(&admin, "prometheus").await;
    let token = server
        .token("monitoring", "prometheus", Duration::from_secs(3600))
        .unwrap();

    let status = review(&admin, &token, None).await.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:monitoring:prometheus")
    );
    assert_eq!(user.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:monitoring",
            "system:authenticated"
        ]
    );
    let audiences = status.audiences.unwrap();
    assert_eq!(audiences, ["https://kubernetes.default.svc.cluster.local"]);
    let asked = review(&admin, &token, Some(&[audiences[0].as_str()]))
        .await
        .unwrap();
    assert_eq!(asked.authenticated, Some(true));

    // The admin token is the admin.
    let status = review(&admin, server.admin_token(), None).await.unwrap();
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("wasmctrl-admin"));
    assert!(user.groups.unwrap().contains(&"system:masters".into()));

    // A token the server did not issue, one whose signature was changed, and one for another
    // audience are not authenticated, and say why.
    let forged = format!("{}0", token.trim_end_matches(|c: char| c != '.'));
    for bogus in ["not-a-token", forged.as_str()] {
        let status = review(&admin, bogus, None).await.unwrap();
        assert_ne!(status.authenticated, Some(true), "{bogus}: {status:?}");
        assert_eq!(status.error.as_deref(), Some("invalid bearer token"));
        assert_eq!(status.user.unwrap_or_default().username, None);
    }
    let other = review(&admin, &token, Some(&["https://vault.example"]))
        .await
        .unwrap();
    assert_ne!(other.authenticated, Some(true));
    assert!(
        other
            .error
            .unwrap()
            .contains("invalid for the target audiences")
    );

    // An empty token is a bad request, as in kube.
    let e = review(&admin, "", None).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 400), "{e}");

    // Reviewing tokens takes `create` on tokenreviews, which a bare ServiceAccount lacks.
    let e = review(&server.client_with_token(&token), &token, None)
        .await
        .unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 403), "{e}");
}

#[tokio::test]
async fn discovery_lists_tokenreviews_as_create_only_and_cluster_scoped() {
    let server = ApiServer::new().unwrap();
    let resources = server
        .client()
        .list_api_group_resources("authentication.k8s.io/v1")
        .await
        .unwrap();
    let review = resources
        .resources
        .iter()
        .find(|r| r.name == "tokenreviews")
        .unwrap_or_else(|| panic!("{resources:?}"));
    assert_eq!(review.kind, "TokenReview");
    assert!(!review.namespaced);
    assert_eq!(review.verbs, ["create"]);
}
