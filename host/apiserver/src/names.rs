//! Generated names as kube generates them: `generateName`'s random suffix
//! (`names.SimpleNameGenerator`) and hashes spelt in `rand.SafeEncodeString`'s alphabet (no
//! vowels, no look-alikes), as pod-template and revision hashes are.

/// `rand.SafeEncodeString`'s alphabet.
pub(crate) const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The five random characters `generateName` appends.
pub(crate) fn random_suffix() -> String {
    use rand::Rng;
    let mut r = rand::rng();
    (0..5)
        .map(|_| char::from(SAFE_ALPHABET[r.random_range(0..SAFE_ALPHABET.len())]))
        .collect()
}

/// `hash`'s decimal digits spelt in the safe alphabet (kube's `rand.SafeEncodeString` of
/// the hash's string).
pub(crate) fn safe_encode(hash: u32) -> String {
    (hash.to_string().bytes())
        .map(|d| char::from(SAFE_ALPHABET[usize::from(d) % SAFE_ALPHABET.len()]))
        .collect()
}
