//! A plugin of more than 5 MiB: 6 MiB of data in its data section, which every reconcile reads
//! (a checksum of it goes to the Thing's status), so none of it can be optimised away. For the
//! tests that move large plugins through registries.

use serde_json::json;
use wasmctrl_sdk::kube_core::DynamicObject;
use wasmctrl_sdk::{Action, Context, Error, Gvk, Manifest, Outcome, Reconcile, Reconciler};

/// The data.
static BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob.bin"));

/// The plugin.
pub struct Large;

/// FNV-1a over the data: reads every byte.
fn checksum() -> u64 {
    BLOB.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Reconciler for Large {
    type Object = DynamicObject;
    type Settings = serde_json::Value;

    fn manifest(_: &serde_json::Value) -> Result<Manifest, String> {
        Ok(Manifest::new(
            "large",
            Gvk::new("example.com", "v1", "Thing"),
        ))
    }

    fn reconcile(
        event: Reconcile<DynamicObject>,
        _: &Context<'_, serde_json::Value>,
    ) -> Result<Outcome, Error> {
        let Reconcile::Apply(_) = event else {
            return Ok(Outcome::done());
        };
        let status = json!({"phase": "Ready", "bytes": BLOB.len(), "checksum": format!("{:016x}", checksum())});
        Ok(Outcome::with(vec![Action::update_status(&status)?]))
    }
}

wasmctrl_sdk::export!(Large);
