//! The `authorization.k8s.io` group's strategies.

mod local_subject_access_review;
mod self_subject_access_review;
mod self_subject_rules_review;
mod subject_access_review;

pub(crate) use local_subject_access_review::LocalSubjectAccessReview;
pub(crate) use self_subject_access_review::SelfSubjectAccessReview;
pub(crate) use self_subject_rules_review::SelfSubjectRulesReview;
pub(crate) use subject_access_review::SubjectAccessReview;
