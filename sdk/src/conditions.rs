//! Status conditions as Kubernetes defines them (`metav1.Condition`) and apimachinery's
//! `meta.SetStatusCondition`: what every controller that reports conditions writes by hand
//! otherwise.
//!
//! ```
//! use wasmctrl_sdk::conditions::{Condition, set_condition};
//! use wasmctrl_sdk::jiff::Timestamp;
//! let (t1, t2): (Timestamp, Timestamp) =
//!     ("2026-01-01T00:00:00Z".parse().unwrap(), "2026-01-02T00:00:00Z".parse().unwrap());
//! let mut conditions = Vec::new();
//! let ready = Condition::new("Ready", true, "PodRunning", "running on node-1").observed(3);
//! assert!(set_condition(&mut conditions, ready.clone(), t1));
//! // The same status later: the transition time stays, nothing changed.
//! assert!(!set_condition(&mut conditions, ready, t2));
//! assert_eq!(conditions[0].last_transition_time, Some(t1));
//! ```

use jiff::{RoundMode, TimestampRound, Unit};
use serde::{Deserialize, Serialize};

use jiff::Timestamp;

/// A `metav1.Condition`: one aspect of an object's state, as `kubectl wait --for=condition=`
/// and other controllers read it.
///
/// Its CRD schema is `metav1.Condition`'s, as controller-gen writes it for a kubebuilder type:
/// every field but `observedGeneration` required, `type` a qualified name of at most 316
/// characters, `reason` CamelCase of 1 to 1024, `message` at most 32768, `status` one of
/// `True`, `False`, `Unknown`. The API server refuses a condition without a reason, as kube's
/// does. In a derived custom resource's status, declare the list with
/// `#[schemars(schema_with = "wasmctrl_sdk::kube::conditions")]`, so that its CRD makes it a
/// list map keyed by `type`, as Kubernetes' own types do.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, CamelCase (`Ready`, `Available`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason for the status, for machines.
    #[serde(default)]
    pub reason: String,
    /// Details for people.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed; [`set_condition`] sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Timestamp>,
    /// The object's `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// `metav1.Condition`'s schema, field for field as controller-gen generates it (descriptions
/// shortened); written out rather than derived because a derived one takes `#[serde(default)]`
/// fields as optional with an empty default, which `reason`'s `minLength` refuses.
impl schemars::JsonSchema for Condition {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Condition".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Condition contains details for one aspect of the current state of this API Resource (a metav1.Condition).",
            "type": "object",
            "properties": {
                "lastTransitionTime": {
                    "description": "The last time the condition transitioned from one status to another.",
                    "type": "string",
                    "format": "date-time",
                },
                "message": {
                    "description": "A human readable message indicating details about the transition. This may be an empty string.",
                    "type": "string",
                    "maxLength": 32768,
                },
                "observedGeneration": {
                    "description": "The .metadata.generation that the condition was set based upon.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
                "reason": {
                    "description": "A programmatic identifier indicating the reason for the condition's last transition, in CamelCase. It may not be empty.",
                    "type": "string",
                    "maxLength": 1024,
                    "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "status": {
                    "description": "Status of the condition, one of True, False, Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                },
                "type": {
                    "description": "Type of condition in CamelCase or in foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                },
            },
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        })
    }
}

/// `status` of a condition that holds.
pub const TRUE: &str = "True";
/// `status` of a condition that does not hold.
pub const FALSE: &str = "False";
/// `status` of a condition that cannot be told.
pub const UNKNOWN: &str = "Unknown";

impl Condition {
    /// A condition of `type_` that holds (`True`) or not (`False`), with a reason and message;
    /// [`set_condition`] stamps its transition time.
    pub fn new(type_: &str, holds: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.into(),
            status: if holds { TRUE } else { FALSE }.into(),
            reason: reason.into(),
            message: message.into(),
            ..Self::default()
        }
    }

    /// A condition of `type_` whose status cannot be told yet (`Unknown`), as a controller
    /// reports `Available` while it waits for what it made to settle.
    pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: UNKNOWN.into(),
            ..Self::new(type_, false, reason, message)
        }
    }

    /// The same, computed from generation `generation` of the object.
    pub fn observed(mut self, generation: i64) -> Self {
        self.observed_generation = generation;
        self
    }

    /// Whether its status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == TRUE
    }

    /// Whether its status is `Unknown`.
    pub fn is_unknown(&self) -> bool {
        self.status == UNKNOWN
    }
}

/// The condition of `type_`, if there is one.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets `condition` in `conditions`, replacing the one of its type, as apimachinery's
/// `SetStatusCondition`: `lastTransitionTime` becomes `now` (to the second, as `metav1.Time`
/// keeps it) when the condition is new or its status changed, and stays otherwise (unless
/// `condition` brings its own). Conditions of other types are kept as they are. Returns whether
/// anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    mut condition: Condition,
    now: Timestamp,
) -> bool {
    let now = now
        .round(
            TimestampRound::new()
                .smallest(Unit::Second)
                .mode(RoundMode::Trunc),
        )
        .unwrap_or(now);
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        condition.last_transition_time.get_or_insert(now);
        conditions.push(condition);
        return true;
    };
    if condition.last_transition_time.is_none() {
        condition.last_transition_time = match existing.last_transition_time {
            Some(then) if existing.status == condition.status => Some(then),
            _ => Some(now),
        };
    }
    let changed = *existing != condition;
    *existing = condition;
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(hour: i64) -> Timestamp {
        // Sub-second parts are dropped when stamped.
        Timestamp::new(hour * 3600, 250_000_000).unwrap()
    }

    fn stamped(hour: i64) -> Option<Timestamp> {
        Some(Timestamp::new(hour * 3600, 0).unwrap())
    }

    /// The constraints controller-gen writes for `metav1.Condition` (apimachinery's
    /// `types.go` markers), which kube-apiserver enforces on a CRD's conditions.
    #[test]
    fn the_schema_is_metav1_conditions() {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Condition>();
        let schema = serde_json::to_value(schema).unwrap();
        let required: Vec<&str> = (schema["required"].as_array().unwrap().iter())
            .filter_map(serde_json::Value::as_str)
            .collect();
        assert_eq!(
            required,
            ["lastTransitionTime", "message", "reason", "status", "type"]
        );
        let field = |name: &str| &schema["properties"][name];
        assert_eq!(field("type")["maxLength"], 316);
        assert_eq!(field("reason")["minLength"], 1);
        assert_eq!(field("reason")["maxLength"], 1024);
        assert_eq!(field("message")["maxLength"], 32768);
        assert_eq!(field("observedGeneration")["minimum"], 0);
        assert_eq!(field("lastTransitionTime")["format"], "date-time");
        assert_eq!(
            field("status")["enum"],
            serde_json::json!(["True", "False", "Unknown"])
        );
        // What the patterns admit and refuse, as kube's validation would.
        let matches = |name: &str, text: &str| {
            let pattern = field(name)["pattern"].as_str().unwrap();
            regex::Regex::new(pattern).unwrap().is_match(text)
        };
        assert!(matches("reason", "PodRunning") && matches("reason", "A_b:c,D"));
        assert!(
            !matches("reason", "")
                && !matches("reason", "9Lives")
                && !matches("reason", "Pod Running")
        );
        assert!(matches("type", "Ready") && matches("type", "example.com/Ready"));
        assert!(!matches("type", "-Ready") && !matches("type", "Example.com/Ready"));
        // What `Condition::new` and `set_condition` write satisfies it.
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            Condition::new("Ready", true, "Up", ""),
            t(1),
        );
        let written = serde_json::to_value(&conditions[0]).unwrap();
        for key in required {
            assert!(written.get(key).is_some(), "{key} missing from {written}");
        }
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_does() {
        let mut conditions = vec![Condition::new("Other", true, "Theirs", "kept")];
        let pending = Condition::new("Ready", false, "PodPending", "scheduling").observed(1);
        assert!(set_condition(&mut conditions, pending, t(1)));
        let waiting = Condition::new("Ready", false, "PodPending", "starting on n1").observed(2);
        assert!(
            set_condition(&mut conditions, waiting.clone(), t(2)),
            "message and generation changed"
        );
        assert_eq!(
            find_condition(&conditions, "Ready")
                .unwrap()
                .last_transition_time,
            stamped(1)
        );
        assert!(
            !set_condition(&mut conditions, waiting, t(3)),
            "nothing changed"
        );
        let running = Condition::new("Ready", true, "PodRunning", "running").observed(2);
        assert!(set_condition(&mut conditions, running, t(4)));
        let ready = find_condition(&conditions, "Ready").unwrap();
        assert!(ready.is_true());
        assert_eq!(ready.last_transition_time, stamped(4));
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].reason, "Theirs", "other types are left alone");
    }

    #[test]
    fn unknown_is_a_status_of_its_own() {
        let mut conditions = Vec::new();
        let waiting = Condition::unknown("Available", "Waiting", "no Job has run yet");
        assert!(waiting.is_unknown() && !waiting.is_true());
        assert_eq!(waiting.status, UNKNOWN);
        set_condition(&mut conditions, waiting, t(1));
        let available = Condition::new("Available", true, "Ran", "a Job ran");
        assert!(set_condition(&mut conditions, available, t(2)));
        assert_eq!(
            conditions[0].last_transition_time,
            stamped(2),
            "Unknown to True moves it"
        );
    }

    #[test]
    fn it_serializes_as_metav1_condition() {
        let c = Condition {
            last_transition_time: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            ..Condition::new("Ready", true, "Up", "fine").observed(4)
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"type": "Ready", "status": "True", "reason": "Up", "message": "fine",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 4})
        );
    }
}
