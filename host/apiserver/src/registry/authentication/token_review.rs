//! TokenReviews: answered by `reviews`, never stored.

use crate::registry::Strategy;

/// The strategy of `authentication.k8s.io/TokenReview`.
pub(crate) struct TokenReview;

impl Strategy for TokenReview {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("authentication.k8s.io", "TokenReview")
    }
}
