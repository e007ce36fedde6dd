//! Writes the plugin's 6 MiB of data: a pseudo-random sequence (xorshift), which neither the
//! compiler nor `wasm-opt` can shrink the way they would zeros or a repeated pattern.

fn main() {
    const SIZE: usize = 6 << 20;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = Vec::with_capacity(SIZE);
    while data.len() < SIZE {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data.extend_from_slice(&state.to_le_bytes());
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("blob.bin"), &data).expect("write the data");
    println!("cargo::rerun-if-changed=build.rs");
}
