//! Building plugin crates into components (being written).
