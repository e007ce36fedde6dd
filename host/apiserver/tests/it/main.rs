//! The dev cluster's integration tests, one module per subject, in one test binary (see the
//! host's `tests/it/main.rs` for why one).

mod common;

mod cluster;
mod conversion;
mod crd_defaults;
mod endpoints;
mod jobs;
mod list_history;
mod metrics;
mod policies;
mod shards;
mod statefulsets;
mod webhooks;
