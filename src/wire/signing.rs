//! Message authentication: the HMAC that Jupyter puts in the signature frame.
//!
//! The signature covers the four JSON frames (header, parent header, metadata,
//! content) and nothing else; buffers are not signed. An empty key means the
//! connection is unsigned, as in jupyter_client.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Sha224, Sha256, Sha384, Sha512};

/// Why a connection file's signing settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error(
        "unsupported signature_scheme {0:?}: mahtab supports hmac-sha256, hmac-sha224, hmac-sha384 and hmac-sha512"
    )]
    UnsupportedScheme(String),
}

/// Why a received signature was not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("message is unsigned but the connection has a key")]
    Unsigned,
    #[error("signature is not valid hex")]
    NotHex,
    #[error("signature does not match")]
    Mismatch,
}

#[derive(Clone)]
enum Key {
    Sha224(Hmac<Sha224>),
    Sha256(Hmac<Sha256>),
    Sha384(Hmac<Sha384>),
    Sha512(Hmac<Sha512>),
}

/// Signs outgoing and verifies incoming messages with one connection's key.
///
/// The key itself is never printed: `Debug` shows only the scheme.
#[derive(Clone)]
pub struct Signer {
    key: Option<Key>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match &self.key {
            None => "unsigned",
            Some(Key::Sha224(_)) => "hmac-sha224",
            Some(Key::Sha256(_)) => "hmac-sha256",
            Some(Key::Sha384(_)) => "hmac-sha384",
            Some(Key::Sha512(_)) => "hmac-sha512",
        };
        f.debug_struct("Signer").field("scheme", &scheme).finish()
    }
}

macro_rules! with_mac {
    ($key:expr, |$mac:ident| $body:expr) => {
        match $key {
            Key::Sha224(k) => {
                let mut $mac = k.clone();
                $body
            }
            Key::Sha256(k) => {
                let mut $mac = k.clone();
                $body
            }
            Key::Sha384(k) => {
                let mut $mac = k.clone();
                $body
            }
            Key::Sha512(k) => {
                let mut $mac = k.clone();
                $body
            }
        }
    };
}

impl Signer {
    /// A signer for `key` under `scheme` (the connection file's
    /// `signature_scheme`; empty means the default, hmac-sha256).
    pub fn new(scheme: &str, key: &[u8]) -> Result<Self, SigningError> {
        if key.is_empty() {
            return Ok(Self { key: None });
        }
        // HMAC accepts keys of any length, so `new_from_slice` cannot fail here.
        let key = match scheme {
            "" | "hmac-sha256" => Key::Sha256(Hmac::new_from_slice(key).expect("any key length")),
            "hmac-sha224" => Key::Sha224(Hmac::new_from_slice(key).expect("any key length")),
            "hmac-sha384" => Key::Sha384(Hmac::new_from_slice(key).expect("any key length")),
            "hmac-sha512" => Key::Sha512(Hmac::new_from_slice(key).expect("any key length")),
            other => return Err(SigningError::UnsupportedScheme(other.to_owned())),
        };
        Ok(Self { key: Some(key) })
    }

    /// A signer for connections without a key.
    pub fn unsigned() -> Self {
        Self { key: None }
    }

    pub fn is_signed(&self) -> bool {
        self.key.is_some()
    }

    /// The lowercase hex signature of `parts`, or an empty string when unsigned.
    pub fn sign(&self, parts: &[&[u8]]) -> String {
        let Some(key) = &self.key else {
            return String::new();
        };
        with_mac!(key, |mac| {
            for part in parts {
                mac.update(part);
            }
            hex::encode(mac.finalize().into_bytes())
        })
    }

    /// Checks `signature` (hex, as sent) over `parts` in constant time and
    /// returns the decoded tag (empty when unsigned). The tag, not the text,
    /// identifies a message: hex is case-insensitive, so one tag has many
    /// spellings, and replay protection must see them as one.
    pub fn verify(&self, signature: &[u8], parts: &[&[u8]]) -> Result<Vec<u8>, VerifyError> {
        let Some(key) = &self.key else {
            return Ok(Vec::new());
        };
        if signature.is_empty() {
            return Err(VerifyError::Unsigned);
        }
        let tag = hex::decode(signature).map_err(|_| VerifyError::NotHex)?;
        with_mac!(key, |mac| {
            for part in parts {
                mac.update(part);
            }
            mac.verify_slice(&tag).map_err(|_| VerifyError::Mismatch)
        })?;
        Ok(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_a_known_vector() {
        // RFC 4231 test case 2.
        let signer = Signer::new("hmac-sha256", b"Jefe").unwrap();
        assert_eq!(
            signer.sign(&[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn verify_accepts_own_signature_and_rejects_tampering() {
        let signer = Signer::new("hmac-sha512", b"secret").unwrap();
        let sig = signer.sign(&[b"a", b"b"]);
        let tag = signer.verify(sig.as_bytes(), &[b"a", b"b"]).unwrap();
        assert_eq!(hex::encode(&tag), sig);
        let upper = sig.to_uppercase();
        assert_eq!(signer.verify(upper.as_bytes(), &[b"a", b"b"]), Ok(tag));
        assert_eq!(
            signer.verify(sig.as_bytes(), &[b"a", b"c"]),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(signer.verify(b"", &[b"a"]), Err(VerifyError::Unsigned));
        assert_eq!(signer.verify(b"zz", &[b"a"]), Err(VerifyError::NotHex));
    }

    #[test]
    fn empty_key_is_unsigned_and_unknown_scheme_is_refused() {
        let signer = Signer::new("hmac-md5", b"").unwrap();
        assert!(!signer.is_signed());
        assert_eq!(signer.sign(&[b"x"]), "");
        assert!(matches!(
            Signer::new("hmac-md5", b"k"),
            Err(SigningError::UnsupportedScheme(_))
        ));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let signer = Signer::new("hmac-sha256", b"topsecret").unwrap();
        assert!(!format!("{signer:?}").contains("topsecret"));
    }
}
