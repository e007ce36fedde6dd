//! The `authentication.k8s.io` group's strategies.

mod self_subject_review;
mod token_review;

pub(crate) use self_subject_review::SelfSubjectReview;
pub(crate) use token_review::TokenReview;
