//! StorageClasses (the default one is `defaults::default_class`).

use crate::printers::{self, Printer};
use crate::registry::Strategy;

/// The strategy of `storage.k8s.io/StorageClass`.
pub(crate) struct StorageClass;

impl Strategy for StorageClass {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("storage.k8s.io", "StorageClass")
    }

    fn printer(&self) -> &'static Printer {
        &printers::STORAGE_CLASS
    }
}
