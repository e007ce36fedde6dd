//! Endpoints (written here by the endpoints controller, `cluster`).

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const ENDPOINTS: TypeMeta = TypeMeta::new("v1", "Endpoints");

/// The strategy of `Endpoints`.
pub(crate) struct Endpoints;

impl Strategy for Endpoints {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Endpoints")
    }

    fn printer(&self) -> &'static Printer {
        &printers::ENDPOINTS
    }
}
