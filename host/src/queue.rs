//! The client-go workqueue contract (being written).
