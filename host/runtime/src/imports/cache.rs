//! `wasmctrl:plugin/cache`: reads from the host's cache, limited to the kinds, namespaces and
//! labels the plugin's scope allows. A refused read answers the plugin with an error and fails
//! the reconcile (see `State::refused`).
use wasmctrl_core::{Gvk, Refusal, Verb};

use crate::plugin::bindings::current::wasmctrl::plugin::cache::Host;
use crate::plugin::wit;
use crate::selector::LabelSelector;
use crate::view::Lookup;

use super::State;

impl State {
    /// Records the first refusal of this call and turns it into the plugin's error.
    fn refuse(&mut self, refusal: Refusal) -> String {
        let message = refusal.to_string();
        tracing::warn!(plugin.name = %self.plugin, object.key = %self.key, %refusal, "cache read refused");
        self.refused.get_or_insert(refusal);
        message
    }
}

impl Host for State {
    fn get(
        &mut self,
        kind: wit::Gvk,
        namespace: String,
        name: String,
    ) -> Result<Option<String>, String> {
        let Some(scope) = self.scope.clone() else {
            return Err("the cache cannot be read from manifest()".into());
        };
        let wanted = Gvk::from(&kind);
        let reads = match scope.check_read(Verb::Get, &wanted, &namespace, &name) {
            Ok(reads) => reads,
            Err(refusal) => return Err(self.refuse(refusal)),
        };
        match self.view.get(&wanted, &namespace, &name, &reads) {
            Lookup::Found(json) => Ok(Some(json.to_string())),
            Lookup::Absent => Ok(None),
            Lookup::OutOfScope => {
                let reason = format!(
                    "its labels are outside the declared selector ({})",
                    reads.selectors()
                );
                Err(self.refuse(Refusal::new(Verb::Get, &wanted, &namespace, &name, reason)))
            }
        }
    }

    fn list(
        &mut self,
        kind: wit::Gvk,
        namespace: String,
        labels: String,
    ) -> Result<Vec<String>, String> {
        let Some(scope) = self.scope.clone() else {
            return Err("the cache cannot be read from manifest()".into());
        };
        let selector = LabelSelector::parse(&labels).map_err(|e| e.to_string())?;
        let wanted = Gvk::from(&kind);
        let reads = match scope.check_read(Verb::List, &wanted, &namespace, "") {
            Ok(reads) => reads,
            Err(refusal) => return Err(self.refuse(refusal)),
        };
        if let Err(reason) = reads.check_selector(&selector) {
            return Err(self.refuse(Refusal::new(Verb::List, &wanted, &namespace, "", reason)));
        }
        Ok(self
            .view
            .list(&wanted, &namespace, &selector, &reads)
            .iter()
            .map(|j| j.to_string())
            .collect())
    }

    fn children(
        &mut self,
        kind: wit::Gvk,
        namespace: String,
        owner_uid: String,
    ) -> Result<Vec<String>, String> {
        let Some(scope) = self.scope.clone() else {
            return Err("the cache cannot be read from manifest()".into());
        };
        let wanted = Gvk::from(&kind);
        let reads = match scope.check_read(Verb::List, &wanted, &namespace, "") {
            Ok(reads) => reads,
            Err(refusal) => return Err(self.refuse(refusal)),
        };
        Ok(self
            .view
            .children(&wanted, &namespace, &owner_uid, &reads)
            .iter()
            .map(|j| j.to_string())
            .collect())
    }
}
