//! The wasmtime dispatch runtime (being written).
