//! Embedded Kubernetes API server (being written).
