//! The strategy custom resources share, driven by their CRD: their schema's defaults,
//! pruning and validation are applied as they are admitted (`write`, through `schema`), their
//! columns are the CRD's (`table`), their selectable fields its `selectableFields`. What kube's
//! `customresource` strategy adds for every one of them is here.

use super::Strategy;

/// The strategy of every custom resource.
pub(crate) struct CustomResource;

impl Strategy for CustomResource {
    /// Not one kind: the CRD's, which the catalog knows.
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "")
    }

    fn has_generation(&self) -> bool {
        true
    }

    /// A PUT must name the version it replaces, so no write blindly replaces another's.
    fn allows_unconditional_update(&self) -> bool {
        false
    }
}

/// kube's generic registry behaviour alone, for a built-in kind without a strategy of its own
/// (none: `registry`'s tests hold every kind of the catalog to a strategy file).
pub(crate) struct Generic;

impl Strategy for Generic {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "")
    }
}

/// The one [`Generic`].
pub(crate) static UNLISTED: Generic = Generic;
