//! The plugin contract as the host sees it: what a plugin declares ([`Manifest`]) and what it
//! may ask for ([`Intent`]), checked before anything reaches the API server.

pub mod bindings;
mod intent;
mod manifest;

pub use bindings::wasmctrl::plugin::types as wit;
pub use intent::{ActionError, Intent, Target, check_actions};
pub use manifest::{Manifest, ManifestError, Read, kind};
