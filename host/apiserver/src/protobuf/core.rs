//! Field tables for the core/v1 kinds kubectl's typed commands send as protobuf (Namespace,
//! ConfigMap, Secret, Service) and the pod template Deployments embed. Numbers follow
//! k8s.io/api `core/v1/generated.proto`; of the pod spec, the fields `kubectl create` sets and
//! their common neighbours (volumes, probes and security contexts are skipped).

use super::schema::{Field, META, Ty};

/// core/v1 Namespace.
pub(super) const NAMESPACE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(&[(1, "finalizers", Ty::Strs)])),
    (3, "status", Ty::Msg(&[(1, "phase", Ty::Str)])),
];

/// core/v1 ConfigMap.
pub(super) const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "data", Ty::Map),
    (3, "binaryData", Ty::BytesMap),
    (4, "immutable", Ty::BoolSet),
];

/// core/v1 Secret.
pub(super) const SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "data", Ty::BytesMap),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::Map),
    (5, "immutable", Ty::BoolSet),
];

/// core/v1 Service.
pub(super) const SERVICE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(SERVICE_SPEC)),
    (3, "status", Ty::Msg(SERVICE_STATUS)),
];

const SERVICE_SPEC: &[Field] = &[
    (1, "ports", Ty::Msgs(SERVICE_PORT)),
    (2, "selector", Ty::Map),
    (3, "clusterIP", Ty::Str),
    (4, "type", Ty::Str),
    (5, "externalIPs", Ty::Strs),
    (7, "sessionAffinity", Ty::Str),
    (8, "loadBalancerIP", Ty::Str),
    (9, "loadBalancerSourceRanges", Ty::Strs),
    (10, "externalName", Ty::Str),
    (11, "externalTrafficPolicy", Ty::Str),
    (12, "healthCheckNodePort", Ty::Int),
    (13, "publishNotReadyAddresses", Ty::Bool),
    (
        14,
        "sessionAffinityConfig",
        Ty::Msg(&[(1, "clientIP", Ty::Msg(&[(1, "timeoutSeconds", Ty::IntSet)]))]),
    ),
    (17, "ipFamilyPolicy", Ty::StrSet),
    (18, "clusterIPs", Ty::Strs),
    (19, "ipFamilies", Ty::Strs),
    (20, "allocateLoadBalancerNodePorts", Ty::BoolSet),
    (21, "loadBalancerClass", Ty::StrSet),
    (22, "internalTrafficPolicy", Ty::StrSet),
];

const SERVICE_PORT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "protocol", Ty::Str),
    (3, "port", Ty::IntSet),
    (4, "targetPort", Ty::IntOrStr),
    (5, "nodePort", Ty::Int),
    (6, "appProtocol", Ty::StrSet),
];

const SERVICE_STATUS: &[Field] = &[(
    1,
    "loadBalancer",
    Ty::Msg(&[(
        1,
        "ingress",
        Ty::Msgs(&[(1, "ip", Ty::Str), (2, "hostname", Ty::Str)]),
    )]),
)];

/// core/v1 PodTemplateSpec.
pub(super) const POD_TEMPLATE: &[Field] = &[
    (1, "metadata", Ty::Msg(META)),
    (2, "spec", Ty::Msg(POD_SPEC)),
];

const POD_SPEC: &[Field] = &[
    (2, "containers", Ty::Msgs(CONTAINER)),
    (3, "restartPolicy", Ty::Str),
    (4, "terminationGracePeriodSeconds", Ty::IntSet),
    (5, "activeDeadlineSeconds", Ty::IntSet),
    (6, "dnsPolicy", Ty::Str),
    (7, "nodeSelector", Ty::Map),
    (8, "serviceAccountName", Ty::Str),
    (9, "serviceAccount", Ty::Str),
    (10, "nodeName", Ty::Str),
    (11, "hostNetwork", Ty::Bool),
    (12, "hostPID", Ty::Bool),
    (13, "hostIPC", Ty::Bool),
    (15, "imagePullSecrets", Ty::Msgs(LOCAL_REF)),
    (16, "hostname", Ty::Str),
    (17, "subdomain", Ty::Str),
    (19, "schedulerName", Ty::Str),
    (20, "initContainers", Ty::Msgs(CONTAINER)),
    (21, "automountServiceAccountToken", Ty::BoolSet),
    (22, "tolerations", Ty::Msgs(TOLERATION)),
    (24, "priorityClassName", Ty::Str),
    (25, "priority", Ty::IntSet),
    (27, "shareProcessNamespace", Ty::BoolSet),
    (29, "runtimeClassName", Ty::StrSet),
    (30, "enableServiceLinks", Ty::BoolSet),
    (31, "preemptionPolicy", Ty::StrSet),
    (35, "setHostnameAsFQDN", Ty::BoolSet),
];

const CONTAINER: &[Field] = &[
    (1, "name", Ty::StrSet),
    (2, "image", Ty::Str),
    (3, "command", Ty::Strs),
    (4, "args", Ty::Strs),
    (5, "workingDir", Ty::Str),
    (6, "ports", Ty::Msgs(CONTAINER_PORT)),
    (7, "env", Ty::Msgs(ENV_VAR)),
    (
        8,
        "resources",
        Ty::Msg(&[(1, "limits", Ty::QtyMap), (2, "requests", Ty::QtyMap)]),
    ),
    (13, "terminationMessagePath", Ty::Str),
    (14, "imagePullPolicy", Ty::Str),
    (16, "stdin", Ty::Bool),
    (17, "stdinOnce", Ty::Bool),
    (18, "tty", Ty::Bool),
    (19, "envFrom", Ty::Msgs(ENV_FROM)),
    (20, "terminationMessagePolicy", Ty::Str),
];

const CONTAINER_PORT: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "hostPort", Ty::Int),
    (3, "containerPort", Ty::IntSet),
    (4, "protocol", Ty::Str),
    (5, "hostIP", Ty::Str),
];

const ENV_VAR: &[Field] = &[
    (1, "name", Ty::StrSet),
    (2, "value", Ty::Str),
    (
        3,
        "valueFrom",
        Ty::Msg(&[
            (
                1,
                "fieldRef",
                Ty::Msg(&[(1, "apiVersion", Ty::Str), (2, "fieldPath", Ty::StrSet)]),
            ),
            (3, "configMapKeyRef", Ty::Msg(KEY_REF)),
            (4, "secretKeyRef", Ty::Msg(KEY_REF)),
        ]),
    ),
];

/// ConfigMapKeySelector and SecretKeySelector (same shape).
const KEY_REF: &[Field] = &[
    (1, "", Ty::Inline(LOCAL_REF)),
    (2, "key", Ty::StrSet),
    (3, "optional", Ty::BoolSet),
];

const ENV_FROM: &[Field] = &[
    (1, "prefix", Ty::Str),
    (2, "configMapRef", Ty::Msg(ENV_SOURCE)),
    (3, "secretRef", Ty::Msg(ENV_SOURCE)),
];

/// ConfigMapEnvSource and SecretEnvSource (same shape).
const ENV_SOURCE: &[Field] = &[(1, "", Ty::Inline(LOCAL_REF)), (2, "optional", Ty::BoolSet)];

const LOCAL_REF: &[Field] = &[(1, "name", Ty::Str)];

const TOLERATION: &[Field] = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "value", Ty::Str),
    (4, "effect", Ty::Str),
    (5, "tolerationSeconds", Ty::IntSet),
];
