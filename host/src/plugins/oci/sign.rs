//! Keyed signatures in the format cosign writes and reads (`cosign sign --key`, `cosign verify
//! --key cosign.pub`): a manifest tagged `sha256-<hex>.sig` in the artifact's repository, each
//! of its layers a simple-signing payload (`application/vnd.dev.cosign.simplesigning.v1+json`)
//! naming the signed manifest digest, with an ECDSA P-256 / SHA-256 signature of the payload's
//! bytes, base64 of its ASN.1 DER, in the layer's `dev.cosignproject.cosign/signature`
//! annotation.
//!
//! The cryptography is ring's (already the host's TLS provider). The `sigstore` crate does all
//! of this and keyless (Fulcio certificates, Rekor transparency log) too, but brings a second
//! TLS, HTTP and crypto stack for the keyed path alone; keyless needs the public Sigstore
//! services, which these hosts cannot reach, and is not supported yet. Keys: public keys as
//! cosign writes `cosign.pub` (an SPKI PEM of a P-256 key); private keys for `wasmctrl sign` as
//! unencrypted PKCS#8 PEM (cosign's own encrypted key files are not read).

use base64::Engine as _;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};

/// The media type of a signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a simple-signing payload.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The tag the signatures of manifest `digest` live under: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Option<String> {
    let (algorithm, hex) = digest.split_once(':')?;
    super::pull::is_sha256(digest).then(|| format!("{algorithm}-{hex}.sig"))
}

/// The simple-signing payload cosign signs for the manifest `digest` of `repository`
/// (`registry/repository`).
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// The body of the first PEM block labelled `label` in `text`.
fn pem(text: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text
        .find(&begin)
        .ok_or_else(|| format!("no {begin} block"))?;
    let body = &text[start + begin.len()..];
    let stop = body.find(&end).ok_or_else(|| format!("no {end}"))?;
    let base64: String = body[..stop].split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map_err(|_| format!("the {label} block is not base64"))
}

/// A private key to sign with.
pub struct SigningKey(EcdsaKeyPair);

impl SigningKey {
    /// An ECDSA P-256 key from an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, as
    /// `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes).
    pub fn from_pem(text: &str) -> Result<Self, String> {
        let der = pem(text, "PRIVATE KEY")?;
        EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &der,
            &ring::rand::SystemRandom::new(),
        )
        .map(Self)
        .map_err(|e| format!("not an ECDSA P-256 PKCS#8 private key: {e}"))
    }

    /// The signature of `payload`, as the annotation carries it.
    pub fn sign(&self, payload: &[u8]) -> Result<String, String> {
        let signature = (self.0)
            .sign(&ring::rand::SystemRandom::new(), payload)
            .map_err(|_| "signing failed".to_string())?;
        Ok(base64::engine::general_purpose::STANDARD.encode(signature.as_ref()))
    }

    /// Its public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.public_key().as_ref().to_vec())
    }
}

/// The DER prefix of every SPKI of an uncompressed P-256 point: SEQUENCE { SEQUENCE { OID
/// id-ecPublicKey, OID prime256v1 }, BIT STRING (65 bytes, no unused bits) }. DER is canonical,
/// so such a key is exactly these 26 bytes and its 65-byte point; no ASN.1 parser is needed.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A public key to verify with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(Vec<u8>);

impl PublicKey {
    /// An ECDSA P-256 public key from an SPKI PEM (`-----BEGIN PUBLIC KEY-----`, as cosign
    /// writes `cosign.pub`).
    pub fn from_pem(text: &str) -> Result<Self, String> {
        let der = pem(text, "PUBLIC KEY")?;
        match der.strip_prefix(&P256_SPKI_PREFIX[..]) {
            Some(point) if point.len() == 65 && point[0] == 0x04 => Ok(Self(point.to_vec())),
            _ => Err("not an ECDSA P-256 public key (SPKI PEM)".into()),
        }
    }

    /// The key as SPKI PEM.
    pub fn to_pem(&self) -> String {
        let der = [&P256_SPKI_PREFIX[..], &self.0].concat();
        let base64 = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = (0..base64.len())
            .step_by(64)
            .map(|i| &base64[i..(i + 64).min(base64.len())])
            .collect();
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            lines.join("\n")
        )
    }

    /// Whether `signature` (base64 of ASN.1 DER) is this key's over `payload`.
    fn verifies(&self, payload: &[u8], signature: &str) -> bool {
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
            return false;
        };
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.0)
            .verify(payload, &der)
            .is_ok()
    }
}

/// A signature layer as pulled: its payload and the annotation's signature.
#[derive(Debug, Clone)]
pub struct Signature {
    /// The simple-signing payload's bytes (checked against the layer's digest).
    pub payload: Vec<u8>,
    /// Base64 of the signature's DER.
    pub signature: String,
}

/// Why a manifest digest is not verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// No signature was found for it.
    #[error("no signature of {digest} (looked for the tag {tag})")]
    Missing {
        /// The digest.
        digest: String,
        /// Where cosign keeps its signatures.
        tag: String,
    },
    /// Signatures were found, but none by a key given over this digest.
    #[error(
        "none of the {found} signature(s) under {tag} is by a key given (spec.verify.keys) over {digest}"
    )]
    Invalid {
        /// The digest.
        digest: String,
        /// Where they were.
        tag: String,
        /// How many there were.
        found: usize,
    },
}

/// Whether one of `signatures` is by one of `keys` over manifest `digest`: its payload a
/// cosign simple-signing payload naming `digest`, its signature valid for the payload's
/// bytes.
pub fn verify(
    keys: &[PublicKey],
    digest: &str,
    signatures: &[Signature],
) -> Result<(), Unverified> {
    let tag = signature_tag(digest).unwrap_or_default();
    if signatures.is_empty() {
        return Err(Unverified::Missing {
            digest: digest.to_string(),
            tag,
        });
    }
    let names_digest = |payload: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(payload).is_ok_and(|p| {
            p["critical"]["type"] == PAYLOAD_TYPE
                && p["critical"]["image"]["docker-manifest-digest"] == digest
        })
    };
    let valid = signatures.iter().any(|s| {
        names_digest(&s.payload) && keys.iter().any(|k| k.verifies(&s.payload, &s.signature))
    });
    if valid {
        Ok(())
    } else {
        Err(Unverified::Invalid {
            digest: digest.to_string(),
            tag,
            found: signatures.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (SigningKey, PublicKey) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let text = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let signing = SigningKey::from_pem(&text).unwrap();
        let public = PublicKey::from_pem(&signing.public_key().to_pem()).unwrap();
        (signing, public)
    }

    #[test]
    fn a_signature_verifies_by_its_key_over_its_digest_only() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let other = format!("sha256:{}", "cd".repeat(32));
        let (signing, public) = key();
        let (_, stranger) = key();
        let payload = payload("registry.example.com/plugins/vm", &digest);
        let signed = Signature {
            signature: signing.sign(&payload).unwrap(),
            payload,
        };
        let sigs = std::slice::from_ref(&signed);
        assert_eq!(verify(std::slice::from_ref(&public), &digest, sigs), Ok(()));
        assert!(matches!(
            verify(std::slice::from_ref(&stranger), &digest, sigs),
            Err(Unverified::Invalid { found: 1, .. })
        ));
        // The same signature, presented for another digest.
        assert!(verify(std::slice::from_ref(&public), &other, sigs).is_err());
        // A changed payload no longer matches its signature.
        let mut tampered = signed.clone();
        tampered.payload = payload_for_other(&other);
        assert!(verify(std::slice::from_ref(&public), &other, &[tampered]).is_err());
        assert!(matches!(
            verify(&[public], &digest, &[]),
            Err(Unverified::Missing { .. })
        ));
        assert_eq!(
            signature_tag(&digest).unwrap(),
            format!("sha256-{}.sig", "ab".repeat(32))
        );
    }

    fn payload_for_other(digest: &str) -> Vec<u8> {
        payload("registry.example.com/plugins/vm", digest)
    }

    #[test]
    fn keys_must_be_p256_pems() {
        assert!(PublicKey::from_pem("nothing").is_err());
        let rsa_like = "-----BEGIN PUBLIC KEY-----\nMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQ==\n-----END PUBLIC KEY-----";
        assert!(PublicKey::from_pem(rsa_like).is_err());
        assert!(
            SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
                .is_err()
        );
    }
}
