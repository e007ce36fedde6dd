//! SelfSubjectReviews (`kubectl auth whoami`): answered by `reviews`, never stored.

use crate::registry::Strategy;

/// The strategy of `authentication.k8s.io/SelfSubjectReview`.
pub(crate) struct SelfSubjectReview;

impl Strategy for SelfSubjectReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authentication.k8s.io", "SelfSubjectReview")
    }
}
