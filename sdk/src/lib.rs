//! SDK (being written).
