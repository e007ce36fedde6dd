//! LocalSubjectAccessReviews: answered by `reviews` from RBAC, never stored.

use crate::registry::Strategy;

/// The strategy of `authorization.k8s.io/LocalSubjectAccessReview`.
pub(crate) struct LocalSubjectAccessReview;

impl Strategy for LocalSubjectAccessReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authorization.k8s.io", "LocalSubjectAccessReview")
    }
}
