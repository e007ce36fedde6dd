//! How several replicas of the host share the work: [`leader`] (one replica elected to
//! reconcile, and the fence that stops its requests when it may no longer send them),
//! [`sharding`] (reconciling spread over replicas by slots of the key space) and [`membership`]
//! (each replica's share of the slots, handed over without two replicas reconciling a key at
//! once).

pub mod leader;
pub mod membership;
pub mod sharding;
