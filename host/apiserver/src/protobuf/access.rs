//! Field tables for the kinds of access control kubectl's typed commands send as protobuf:
//! ServiceAccount (`kubectl create serviceaccount`), TokenRequest (`kubectl create token`),
//! Self/SubjectAccessReview (`kubectl auth can-i`), and the RBAC kinds (`kubectl create role|
//! clusterrole|rolebinding|clusterrolebinding`); and TokenReview, which a delegating server's
//! client-go may send so. Numbers follow k8s.io/api's `generated.proto` of core/v1,
//! authentication/v1, authorization/v1 and rbac/v1.

use super::schema::{Field, META, Ty};

/// core/v1 ServiceAccount.
pub(super) const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "secrets", Ty::Msgs(OBJECT_REFERENCE)),
    (3, "imagePullSecrets", Ty::Msgs(&[(1, "name", Ty::Str)])),
    (4, "automountServiceAccountToken", Ty::BoolSet),
];

const OBJECT_REFERENCE: &[Field] = &[
    (1, "kind", Ty::Str),
    (2, "namespace", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "fieldPath", Ty::Str),
];

/// authentication/v1 TokenRequest.
pub(super) const TOKEN_REQUEST: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "audiences", Ty::Strs),
            (
                3,
                "boundObjectRef",
                Ty::Msg(&[
                    (1, "kind", Ty::Str),
                    (2, "apiVersion", Ty::Str),
                    (3, "name", Ty::Str),
                    (4, "uid", Ty::Str),
                ]),
            ),
            (4, "expirationSeconds", Ty::IntSet),
        ]),
    ),
];

/// authentication/v1 TokenReview (client-go's typed clients send it as protobuf when asked to).
pub(super) const TOKEN_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "spec",
        Ty::Msg(&[(1, "token", Ty::Str), (2, "audiences", Ty::Strs)]),
    ),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];

/// authorization/v1 SelfSubjectAccessReview.
pub(super) const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
            (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
        ]),
    ),
];

/// authentication/v1 SelfSubjectReview (`kubectl auth whoami`): only its metadata is asked.
pub(super) const SELF_SUBJECT_REVIEW: &[Field] = &[(1, "metadata", Ty::Msg(META))];

/// authorization/v1 SelfSubjectRulesReview (`kubectl auth can-i --list`).
pub(super) const SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(&[(1, "namespace", Ty::Str)])),
];

/// core/v1 Binding (a scheduler's): the Pod by its metadata, the Node by `target`.
pub(super) const BINDING_TO_NODE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "target",
        Ty::Msg(&[
            (1, "kind", Ty::Str),
            (2, "namespace", Ty::Str),
            (3, "name", Ty::Str),
            (4, "uid", Ty::Str),
            (5, "apiVersion", Ty::Str),
        ]),
    ),
];

/// authorization/v1 SubjectAccessReview (and LocalSubjectAccessReview, the same message).
pub(super) const SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRIBUTES)),
            (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRIBUTES)),
            (3, "user", Ty::Str),
            (4, "groups", Ty::Strs),
            (6, "uid", Ty::Str),
        ]),
    ),
];

const POLICY_RULE: &[Field] = &[
    (1, "verbs", Ty::Strs),
    (2, "apiGroups", Ty::Strs),
    (3, "resources", Ty::Strs),
    (4, "resourceNames", Ty::Strs),
    (5, "nonResourceURLs", Ty::Strs),
];

/// rbac/v1 Role and ClusterRole (aggregation rules are not decoded).
pub(super) const ROLE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "rules", Ty::Msgs(POLICY_RULE)),
];

/// rbac/v1 RoleBinding and ClusterRoleBinding.
pub(super) const BINDING: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (
        2,
        "subjects",
        Ty::Msgs(&[
            (1, "kind", Ty::Str),
            (2, "apiGroup", Ty::Str),
            (3, "name", Ty::Str),
            (4, "namespace", Ty::Str),
        ]),
    ),
    (
        3,
        "roleRef",
        Ty::Msg(&[
            (1, "apiGroup", Ty::Str),
            (2, "kind", Ty::Str),
            (3, "name", Ty::Str),
        ]),
    ),
];
