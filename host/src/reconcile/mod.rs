//! The controller loop, in the order the data takes: [`informer`] (shared watches and caches of
//! the kinds plugins read) -> [`queue`] (the client-go workqueue contract: one key at a time,
//! deduplicated, backed off) -> [`controller`] (one controller per plugin: events to keys, a
//! worker calling the plugin's sandbox with the key and its cached object, what the key's last
//! actions did) -> [`applier`] (carrying out the checked intents against the API server, and
//! the expectations that hold the key until the caches show them).

pub mod applier;
pub mod controller;
pub mod informer;
pub mod queue;
