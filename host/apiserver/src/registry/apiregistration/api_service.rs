//! APIServices (stored; nothing is aggregated here).

use crate::registry::Strategy;

/// The strategy of `apiregistration.k8s.io/APIService`.
pub(crate) struct ApiService;

impl Strategy for ApiService {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apiregistration.k8s.io", "APIService")
    }
}
