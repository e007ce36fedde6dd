//! What a plugin declares and may do (being written).
