//! SelfSubjectRulesReviews: answered by `reviews` from RBAC, never stored.

use crate::registry::Strategy;

/// The strategy of `authorization.k8s.io/SelfSubjectRulesReview`.
pub(crate) struct SelfSubjectRulesReview;

impl Strategy for SelfSubjectRulesReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authorization.k8s.io", "SelfSubjectRulesReview")
    }
}
