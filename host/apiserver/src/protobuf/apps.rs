//! Field tables for apps/v1 Deployment (`kubectl create deployment`). Numbers follow
//! k8s.io/api `apps/v1/generated.proto`.

use super::core::POD_TEMPLATE;
use super::schema::{Field, LABEL_SELECTOR, META, Ty};

/// apps/v1 Deployment.
pub(super) const DEPLOYMENT: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(SPEC)),
    (3, "status", Ty::Msg(STATUS)),
];

const SPEC: &[Field] = &[
    (1, "replicas", Ty::IntSet),
    (2, "selector", Ty::Msg(LABEL_SELECTOR)),
    (3, "template", Ty::Msg(POD_TEMPLATE)),
    (4, "strategy", Ty::Msg(STRATEGY)),
    (5, "minReadySeconds", Ty::Int),
    (6, "revisionHistoryLimit", Ty::IntSet),
    (7, "paused", Ty::Bool),
    (9, "progressDeadlineSeconds", Ty::IntSet),
];

const STRATEGY: &[Field] = &[
    (1, "type", Ty::Str),
    (
        2,
        "rollingUpdate",
        Ty::Msg(&[
            (1, "maxUnavailable", Ty::IntOrStr),
            (2, "maxSurge", Ty::IntOrStr),
        ]),
    ),
];

const STATUS: &[Field] = &[
    (1, "observedGeneration", Ty::Int),
    (2, "replicas", Ty::Int),
    (3, "updatedReplicas", Ty::Int),
    (4, "availableReplicas", Ty::Int),
    (5, "unavailableReplicas", Ty::Int),
    (6, "conditions", Ty::Msgs(CONDITION)),
    (7, "readyReplicas", Ty::Int),
    (8, "collisionCount", Ty::IntSet),
];

const CONDITION: &[Field] = &[
    (1, "type", Ty::StrSet),
    (2, "status", Ty::StrSet),
    (4, "reason", Ty::Str),
    (5, "message", Ty::Str),
    (6, "lastUpdateTime", Ty::Time),
    (7, "lastTransitionTime", Ty::Time),
];
