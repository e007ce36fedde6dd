//! ServiceAccounts.

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const SERVICE_ACCOUNT: TypeMeta = TypeMeta::new("v1", "ServiceAccount");

/// The strategy of `ServiceAccount`.
pub(crate) struct ServiceAccount;

impl Strategy for ServiceAccount {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ServiceAccount")
    }

    fn printer(&self) -> &'static Printer {
        &printers::SERVICE_ACCOUNT
    }
}
