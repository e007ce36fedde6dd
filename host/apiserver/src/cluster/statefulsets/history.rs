//! A StatefulSet's template history, as kube keeps it: ControllerRevisions `<name>-<hash>`
//! holding the strategic merge patch that restores the template, numbered by `revision`,
//! hashed as kube's `HashControllerRevision` hashes (FNV-1 over the patch as Go writes it, and
//! the collision count), and pruned to `revisionHistoryLimit`.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Pass, REVISION, Revisions, revision_of};
use crate::cluster::{controller_uid, create, deleting, objects, update};
use crate::delete;
use crate::json::str_at;
use crate::registry::apps::{CONTROLLER_REVISION, STATEFUL_SET};

impl Pass<'_> {
    /// The StatefulSet's ControllerRevisions, its selector matching (orphans adopted), in
    /// kube's order: by `revision`, then age, then name.
    pub(super) fn claim_revisions(&mut self) -> Vec<Arc<Value>> {
        let t = self.revisions.clone();
        let mut owned = Vec::new();
        for rev in objects(self.st, "apps", "controllerrevisions", Some(&self.set.ns)) {
            if !self.set.selects(&rev) {
                continue;
            }
            match controller_uid(&rev) {
                Some(u) if u == self.set.uid => owned.push(rev),
                None if !deleting(&rev) => owned.extend(self.adopt(&t, &rev)),
                _ => {}
            }
        }
        owned.sort_by_key(|r| {
            (
                r["revision"].as_i64().unwrap_or(0),
                str_at(r, "/metadata/creationTimestamp").to_string(),
                str_at(r, "/metadata/name").to_string(),
            )
        });
        owned
    }

    /// kube's `getStatefulSetRevisions`: the update revision is the one whose data is the
    /// template's (made the newest again on a rollback, created when there is none); the
    /// current one is `status.currentRevision`'s, else the update revision.
    pub(super) fn revisions(&mut self, history: &[Arc<Value>]) -> Option<Revisions> {
        let mut collisions = (self.set.obj.pointer("/status/collisionCount"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let data = crate::cluster::revision_patch(&self.set.obj, STATEFUL_SET);
        let next = history
            .last()
            .map_or(1, |r| r["revision"].as_i64().unwrap_or(0) + 1);
        let t = self.revisions.clone();
        let update_rev = match history.iter().rposition(|r| r["data"] == data) {
            Some(i) if i + 1 == history.len() => history[i].clone(),
            Some(i) => {
                let mut newest = (*history[i]).clone();
                newest["revision"] = json!(next);
                if !update(self.st, &t, &history[i], newest, "a ControllerRevision") {
                    return None;
                }
                self.changed = true;
                let key = (t.res.group.clone(), t.res.plural.clone());
                self.st
                    .get(&key, &self.set.ns, str_at(&history[i], "/metadata/name"))?
            }
            None => self.create_revision(data, next, &mut collisions)?,
        };
        let wanted = str_at(&self.set.obj, "/status/currentRevision");
        let current_rev = (history.iter())
            .find(|r| str_at(r, "/metadata/name") == wanted)
            .unwrap_or(&update_rev);
        Some(Revisions {
            current: str_at(current_rev, "/metadata/name").to_string(),
            current_template: template_of(current_rev),
            update: str_at(&update_rev, "/metadata/name").to_string(),
            update_template: template_of(&update_rev),
            collisions,
        })
    }

    /// Creates the revision `number` holding `data`; a name taken by other data is a
    /// collision, counted, and the name hashed again with the count.
    fn create_revision(
        &mut self,
        data: Value,
        number: i64,
        collisions: &mut i64,
    ) -> Option<Arc<Value>> {
        let bytes = go_json(&data);
        let hash = revision_hash(&bytes, *collisions);
        let set = self.set;
        let mut labels = (set.obj.pointer("/spec/template/metadata/labels"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        labels.insert(REVISION.into(), json!(hash));
        let mut meta = json!({"namespace": set.ns, "labels": labels,
            "ownerReferences": [set.owner_ref()]});
        if let Some(a) = (set.obj.pointer("/metadata/annotations"))
            .and_then(Value::as_object)
            .filter(|a| !a.is_empty())
        {
            meta["annotations"] = json!(a);
        }
        let key = (
            self.revisions.res.group.clone(),
            self.revisions.res.plural.clone(),
        );
        loop {
            let name = revision_name(&set.name, &revision_hash(&bytes, *collisions));
            if let Some(taken) = self.st.get(&key, &set.ns, &name) {
                if taken["data"] == data {
                    return Some(taken);
                }
                *collisions += 1;
                continue;
            }
            meta["name"] = json!(name);
            let rev = json!({"apiVersion": CONTROLLER_REVISION.api_version, "kind": CONTROLLER_REVISION.kind,
                "metadata": meta, "data": data, "revision": number});
            let t = self.revisions.clone();
            let created = create(self.st, &t, rev, "a StatefulSet's ControllerRevision").ok()?;
            self.changed = true;
            return Some(Arc::new(created));
        }
    }

    /// kube's `truncateHistory`: revisions no Pod, nor the status, is at are deleted, oldest
    /// first, down to `revisionHistoryLimit`.
    pub(super) fn truncate_history(
        &mut self,
        pods: &[Arc<Value>],
        history: &[Arc<Value>],
        revs: &Revisions,
    ) {
        let limit = (self.set.obj.pointer("/spec/revisionHistoryLimit"))
            .and_then(Value::as_i64)
            .unwrap_or(10);
        let mut live: HashSet<&str> = [revs.current.as_str(), revs.update.as_str()].into();
        live.extend(pods.iter().map(|p| revision_of(p)));
        let old: Vec<&Arc<Value>> = (history.iter())
            .filter(|r| !live.contains(str_at(r, "/metadata/name")))
            .collect();
        if limit < 0 || old.len() as i64 <= limit {
            return;
        }
        let t = self.revisions.clone();
        for rev in &old[..old.len() - limit as usize] {
            match delete::delete_locked(self.st, &t, rev, false) {
                Ok(_) => self.changed = true,
                Err(e) => {
                    tracing::warn!(revision = %str_at(rev, "/metadata/name"), error = %e.message,
                        "deleting an old ControllerRevision");
                    return;
                }
            }
        }
    }
}

/// The template a revision holds.
fn template_of(rev: &Value) -> Value {
    let mut template = rev
        .pointer("/data/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(m) = template.as_object_mut() {
        m.remove("$patch");
    }
    template
}

/// kube's `ControllerRevisionName`: the parent's name (at most 223 bytes of it) and the hash.
fn revision_name(parent: &str, hash: &str) -> String {
    let mut end = parent.len().min(223);
    while !parent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &parent[..end])
}

/// kube's `HashControllerRevision`: FNV-1 (32-bit) of the data's bytes and the collision
/// count, its decimal digits spelt in the safe alphabet of `rand.SafeEncodeString`.
fn revision_hash(data: &[u8], collisions: i64) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in data.iter().chain(collisions.to_string().as_bytes()) {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    crate::names::safe_encode(h)
}

/// `v` as Go's `json.Marshal` writes a decoded `map[string]interface{}`: keys sorted, numbers
/// as float64, HTML characters escaped.
fn go_json(v: &Value) -> Vec<u8> {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => number(n.as_f64().unwrap_or(0.0), out),
            Value::String(s) => string(s, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    string(k, out);
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
        }
    }
    fn number(f: f64, out: &mut String) {
        let abs = f.abs();
        if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
            // Go's exponent form: `1e+21`, `1e-7`.
            let e = format!("{f:e}");
            match e.split_once('e') {
                Some((m, exp)) if !exp.starts_with('-') => out.push_str(&format!("{m}e+{exp}")),
                _ => out.push_str(&e),
            }
        } else if f.fract() == 0.0 {
            out.push_str(&format!("{}", f as i128));
        } else {
            out.push_str(&format!("{f}"));
        }
    }
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                    out.push_str(&format!("\\u{:04x}", u32::from(c)))
                }
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    let mut out = String::new();
    write(v, &mut out);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_sorts_keys_and_escapes_as_go_does() {
        let v = json!({"b": 1, "a": {"$patch": "replace", "x": "<&>"}, "n": 0.5, "big": 1e21});
        assert_eq!(
            String::from_utf8(go_json(&v)).unwrap(),
            r#"{"a":{"$patch":"replace","x":"\u003c\u0026\u003e"},"b":1,"big":1e+21,"n":0.5}"#
        );
    }

    #[test]
    fn revision_hashes_are_fnv1_in_the_safe_alphabet() {
        // FNV-1 of "0" (no data, no collision) is 84696367; its digits, by byte % 27.
        assert_eq!(revision_hash(b"", 0), "d8bfb7bc");
        assert_eq!(revision_name("web", "abc"), "web-abc");
        assert_eq!(revision_name(&"x".repeat(300), "h").len(), 225);
    }
}
