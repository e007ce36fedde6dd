//! The `events.k8s.io` group's strategies.

mod event;

pub(crate) use event::Event;
