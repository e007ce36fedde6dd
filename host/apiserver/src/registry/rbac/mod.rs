//! The `rbac.authorization.k8s.io` group's strategies.

mod cluster_role;
mod cluster_role_binding;
mod role;
mod role_binding;

pub(crate) use cluster_role::ClusterRole;
pub(crate) use cluster_role_binding::ClusterRoleBinding;
pub(crate) use role::Role;
pub(crate) use role_binding::RoleBinding;
