//! The `pods/{name}/binding` a scheduler posts (also `bindings`): served by `pods`, never
//! stored; kube's generic rules.

use crate::registry::Strategy;

/// The strategy of `Binding`.
pub(crate) struct Binding;

impl Strategy for Binding {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Binding")
    }
}
