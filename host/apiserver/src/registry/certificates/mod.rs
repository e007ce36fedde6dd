//! The `certificates.k8s.io` group's strategies.

mod certificate_signing_request;

pub(crate) use certificate_signing_request::CertificateSigningRequest;
