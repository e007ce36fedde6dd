//! SelfSubjectAccessReviews: answered by `reviews` from RBAC, never stored.

use crate::registry::Strategy;

/// The strategy of `authorization.k8s.io/SelfSubjectAccessReview`.
pub(crate) struct SelfSubjectAccessReview;

impl Strategy for SelfSubjectAccessReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authorization.k8s.io", "SelfSubjectAccessReview")
    }
}
