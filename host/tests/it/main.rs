//! The host's integration tests, one module per subject (`cargo test -p wasmctrl --test it
//! leader::` runs one). One test binary, not one per file: each links the whole host (wasmtime,
//! kube, k8s-openapi, the embedded API server) at about 200 MB, and fifty of them took most of
//! the build's disk and a good part of its time. `make test` runs them under cargo-nextest,
//! one process per test, so tests that install a global tracing subscriber or read their own
//! process's state still see only themselves.

mod common;

mod admission;
mod apiserver_admin;
mod apiserver_auth;
mod apiserver_builtins;
mod apiserver_errors;
mod apiserver_gc;
mod apiserver_kube;
mod apiserver_kubectl;
mod apiserver_persist;
mod apiserver_specs;
mod apiserver_validation;
mod apiserver_watch;
mod applier;
mod build;
mod cli_test;
mod contract;
mod controller;
mod cronjob;
mod deadlines;
mod dev;
mod dev_cluster;
mod docs;
mod events;
mod faults;
mod hostile_registry;
mod image;
mod inspect;
mod languages;
mod leader;
mod loader;
mod logs;
mod memcached;
mod metrics;
mod module_layers;
mod new;
mod oci;
mod plugin_config;
mod plugin_resources;
mod pod_events;
mod pod_restarter;
mod postgres_writer;
mod probes;
mod rbac;
mod reload;
mod resources;
mod runtime;
mod scope;
mod sharding;
mod signals;
mod signatures;
mod sql;
mod virtualmachine;
mod wasi;
mod webapp;
mod workspace;
