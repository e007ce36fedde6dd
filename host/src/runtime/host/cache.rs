//! `wasmctrl:plugin/cache`: reads from the host's cache, limited to the kinds the manifest declares.

use kube::core::GroupVersionKind;

use crate::plugin::bindings::wasmctrl::plugin::cache::Host;
use crate::plugin::wit::Gvk;
use crate::selector::Selector;

use super::State;

impl State {
    fn readable(&self, kind: &Gvk) -> Result<GroupVersionKind, String> {
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        match &self.manifest {
            None => Err("the cache cannot be read from manifest()".into()),
            Some(m) if m.can_read(&gvk) => Ok(gvk),
            Some(_) => Err(format!(
                "{}/{}/{} is not declared in the manifest (watches, owns or reads)",
                kind.group, kind.version, kind.kind
            )),
        }
    }
}

impl Host for State {
    fn get(
        &mut self,
        kind: Gvk,
        namespace: String,
        name: String,
    ) -> Result<Option<String>, String> {
        let gvk = self.readable(&kind)?;
        Ok(self
            .view
            .get(&gvk, &namespace, &name)
            .map(|json| json.to_string()))
    }

    fn list(
        &mut self,
        kind: Gvk,
        namespace: String,
        labels: String,
    ) -> Result<Vec<String>, String> {
        let gvk = self.readable(&kind)?;
        let selector = Selector::parse(&labels).map_err(|e| e.to_string())?;
        Ok(self
            .view
            .list(&gvk, &namespace, &selector)
            .iter()
            .map(|j| j.to_string())
            .collect())
    }
}
