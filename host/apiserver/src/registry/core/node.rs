//! Nodes (the fake Nodes of the simulated cluster among them).

use crate::printers::{self, Printer};
use crate::registry::{Strategy, TypeMeta};
use crate::selector::{self, Field};

/// What its objects, and references to them, carry as `apiVersion` and `kind`.
pub(crate) const NODE: TypeMeta = TypeMeta::new("v1", "Node");

/// The strategy of `Node`.
pub(crate) struct Node;

impl Strategy for Node {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Node")
    }

    fn printer(&self) -> &'static Printer {
        &printers::NODE
    }

    fn selectable_fields(&self) -> &'static [Field] {
        selector::NODE_FIELDS
    }
}
