//! `default`s: applying them (`structuraldefaulting.Default`) and checking a CRD's, as kube's
//! `ValidateDefaults` and its schema validation do before they are ever applied.
//!
//! Applying: a property with a `default` that is absent from its object is set to it,
//! everywhere in the object, defaults inside defaulted values included. Kube applies it to what
//! a client writes (after pruning, before validating) and to what it reads from storage.
//!
//! Checking: each default must hold no field its node's schema would prune ("must not have
//! unknown fields"), must pass that node's schema (the same validator objects go through, so
//! the same words) and then the CEL rules of that subtree; defaults are forbidden in the root's
//! `apiVersion`, `kind` and `metadata` and under `additionalProperties` applying to object
//! metadata, and need `preserveUnknownFields: false`. Not checked, as not by kube either:
//! defaults under other `additionalProperties`, list-type uniqueness. Left out of kube's
//! checks: the ObjectMeta/TypeMeta rules of defaults inside embedded resources' metadata, and
//! CEL transition rules (kube evaluates them with the default as its own old value).

use serde_json::{Value, json};

use super::super::status::Cause;
use super::field::{self, go_printed};
use super::{Additional, Schema, crd_schema_sources, prune_at, validate};

/// Sets the defaults `s` declares below `v`.
pub fn fill(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, p) in &s.properties {
                if let Some(d) = p.default.as_ref().filter(|_| !m.contains_key(k)) {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, value) in m.iter_mut() {
                match (s.properties.get(k), &s.additional) {
                    (Some(p), _) => fill(p, value),
                    (None, Additional::Schema(a)) => fill(a, value),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(i) = &s.items {
                items.iter_mut().for_each(|item| fill(i, item));
            }
        }
        _ => {}
    }
}

/// What kube-apiserver refuses in the `default`s of a CRD whose schemas parse (`old`: the
/// stored CRD of an update, whose unpruned defaults, if it had any, may stay, as kube lets
/// them), with kube's field paths and words.
pub fn crd_errors(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let require_pruned = old.is_none_or(|o| !has_unpruned_defaults(o));
    let (mut out, any_default) = walk_crd(crd, require_pruned);
    if any_default && crd.pointer("/spec/preserveUnknownFields") == Some(&json!(true)) {
        let msg = "must be false in order to use defaults in the schema";
        let cause = field::invalid("spec.preserveUnknownFields", &json!(true), msg);
        out.insert(0, cause);
    }
    out
}

const UNKNOWN_FIELDS: &str = "must not have unknown fields";

/// Whether a stored CRD has a default its schema would prune (kube then lets updates keep such
/// defaults: `requirePrunedDefaults`).
fn has_unpruned_defaults(crd: &Value) -> bool {
    (walk_crd(crd, true).0.iter()).any(|c| c.message.ends_with(UNKNOWN_FIELDS))
}

/// The defaults' causes of every distinct schema of a CRD, and whether it has any default.
fn walk_crd(crd: &Value, require_pruned: bool) -> (Vec<Cause>, bool) {
    let mut out = Vec::new();
    let mut any_default = false;
    for (path, raw) in crd_schema_sources(crd) {
        let s = Schema::parse(raw, &path, &mut Vec::new());
        any_default |= has_defaults(&s);
        let mut walk = Walk {
            require_pruned,
            out: &mut out,
        };
        walk.node(&s, &path, Place::Root);
    }
    (out, any_default)
}

fn has_defaults(s: &Schema) -> bool {
    s.default.is_some()
        || s.properties.values().any(has_defaults)
        || s.items.as_deref().is_some_and(has_defaults)
        || matches!(&s.additional, Additional::Schema(a) if has_defaults(a))
}

/// Where a schema node sits, for the rules on its `default`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place<'a> {
    /// The schema's root (kube checks its default as an embedded resource's).
    Root,
    /// Where defaults are allowed and checked.
    Free,
    /// The `apiVersion`, `kind` or `metadata` of an embedded resource, or below.
    EmbeddedMeta,
    /// The root's `apiVersion`, `kind` or `metadata` (named), or below: no defaults.
    TopLevel(&'a str),
    /// `additionalProperties` applying to object metadata, or below: no defaults.
    MetaAdditional,
}

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

struct Walk<'o> {
    require_pruned: bool,
    out: &'o mut Vec<Cause>,
}

impl Walk<'_> {
    fn node<'s>(&mut self, s: &'s Schema, path: &str, place: Place<'s>) {
        if let Some(d) = &s.default {
            let at = format!("{path}.default");
            match place {
                Place::TopLevel(k) => {
                    let why = format!("must not be set in top-level {k}");
                    self.out.push(field::forbidden(&at, &why));
                }
                Place::MetaAdditional => {
                    let why =
                        "must not be set inside additionalProperties applying to object metadata";
                    self.out.push(field::forbidden(&at, why));
                }
                Place::Root | Place::Free | Place::EmbeddedMeta => {
                    let prune = self.require_pruned && place != Place::EmbeddedMeta;
                    self.value(s, d, &at, prune, place == Place::Root);
                }
            }
        }
        // kube's ValidateDefaults does not follow additionalProperties; its schema validation
        // does, only to forbid defaults applying to metadata.
        if let Additional::Schema(a) = &s.additional
            && matches!(
                place,
                Place::EmbeddedMeta | Place::TopLevel(_) | Place::MetaAdditional
            )
        {
            self.node(
                a,
                &format!("{path}.additionalProperties"),
                Place::MetaAdditional,
            );
        }
        let below = if place == Place::Root {
            Place::Free
        } else {
            place
        };
        if let Some(items) = &s.items {
            self.node(items, &format!("{path}.items"), below);
        }
        for (k, p) in &s.properties {
            let place = match (place, META_FIELDS.contains(&k.as_str())) {
                (Place::Root, true) => Place::TopLevel(k),
                (Place::Free, true) if s.embedded => Place::EmbeddedMeta,
                _ => below,
            };
            self.node(p, &format!("{path}.properties[{k}]"), place);
        }
    }

    /// Checks one default `d` of node `s`, reported at `at` (`....default`).
    fn value(&mut self, s: &Schema, d: &Value, at: &str, prune: bool, root: bool) {
        if prune {
            let mut unknown = Vec::new();
            prune_at(
                s,
                &mut d.clone(),
                false,
                root || s.embedded,
                "",
                &mut unknown,
            );
            if !unknown.is_empty() {
                let printed = go_printed(d);
                let cause = field::invalid_printed(at, &printed, UNKNOWN_FIELDS);
                self.out.push(cause);
            }
        }
        let (schema_causes, rule_causes) = validate::value(s, d);
        // kube names a schema violation `<default path>.<value path>` (`default.[0]` too, as
        // it appends go-openapi's name as one field), a CEL one as a field path proper.
        for mut c in schema_causes {
            c.field = match c.field.as_str() {
                "" => at.to_string(),
                below => format!("{at}.{below}"),
            };
            self.out.push(c);
        }
        for mut c in rule_causes {
            c.field = match c.field.as_str() {
                "" => at.to_string(),
                below if below.starts_with(['.', '[']) => format!("{at}{below}"),
                below => format!("{at}.{below}"),
            };
            self.out.push(c);
        }
    }
}
