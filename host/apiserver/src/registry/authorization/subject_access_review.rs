//! SubjectAccessReviews: answered by `reviews` from RBAC, never stored.

use crate::registry::Strategy;

/// The strategy of `authorization.k8s.io/SubjectAccessReview`.
pub(crate) struct SubjectAccessReview;

impl Strategy for SubjectAccessReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authorization.k8s.io", "SubjectAccessReview")
    }
}
