//! The connection record a launcher sends to Enterprise Gateway, sealed as
//! the gateway's launcher protocol (version 1) wants it: the JSON record is
//! encrypted with a fresh AES-128 key (ECB, PKCS#7 padding), that key with
//! the gateway's RSA public key (PKCS#1 v1.5), and both travel base64-coded
//! inside a base64-coded JSON envelope. Only the gateway, which holds the
//! private key, can read the record and so the kernel's HMAC key.

use aes::cipher::{BlockEncryptMut, KeyInit, block_padding::Pkcs7};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rsa::pkcs8::DecodePublicKey;
use rsa::rand_core::{OsRng, RngCore};
use rsa::{Pkcs1v15Encrypt, RsaPublicKey};
use serde_json::json;

/// The launcher protocol version this module speaks.
pub const VERSION: u32 = 1;

/// Why the record could not be sealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the gateway's public key is not base64: {0}")]
    KeyNotBase64(#[from] base64::DecodeError),
    #[error("the gateway's public key is not an RSA public key: {0}")]
    KeyNotRsa(#[from] rsa::pkcs8::spki::Error),
    #[error("cannot encrypt with the gateway's public key: {0}")]
    Rsa(#[from] rsa::Error),
    #[error("cannot write the record: {0}")]
    Record(#[from] serde_json::Error),
}

/// Seals `record` (the connection information) for the gateway whose public
/// key is `public_key` (base64 of the DER SubjectPublicKeyInfo, as the
/// gateway passes it): returns the bytes to send to its response address.
pub fn seal(record: &impl serde::Serialize, public_key: &str) -> Result<Vec<u8>, SealError> {
    let der = BASE64.decode(public_key.trim())?;
    let public_key = RsaPublicKey::from_public_key_der(&der)?;
    let mut aes_key = [0u8; 16];
    OsRng.fill_bytes(&mut aes_key);
    let plain = serde_json::to_string(record)?;
    let sealed_record = ecb::Encryptor::<aes::Aes128>::new(&aes_key.into())
        .encrypt_padded_vec_mut::<Pkcs7>(plain.as_bytes());
    let sealed_key = public_key.encrypt(&mut OsRng, Pkcs1v15Encrypt, &aes_key)?;
    let envelope = json!({
        "version": VERSION,
        "key": BASE64.encode(sealed_key),
        "conn_info": BASE64.encode(sealed_record),
    });
    Ok(BASE64.encode(envelope.to_string()).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::BlockDecryptMut;
    use rsa::RsaPrivateKey;
    use rsa::pkcs8::EncodePublicKey;
    use serde_json::Value;

    /// Opens a sealed payload the way the gateway does.
    fn open(payload: &[u8], private_key: &RsaPrivateKey) -> Value {
        let envelope: Value = serde_json::from_slice(&BASE64.decode(payload).unwrap()).unwrap();
        assert_eq!(envelope["version"], 1);
        let sealed_key = BASE64.decode(envelope["key"].as_str().unwrap()).unwrap();
        let aes_key = private_key.decrypt(Pkcs1v15Encrypt, &sealed_key).unwrap();
        assert_eq!(aes_key.len(), 16);
        let sealed = BASE64
            .decode(envelope["conn_info"].as_str().unwrap())
            .unwrap();
        assert_eq!(sealed.len() % 16, 0);
        let key: [u8; 16] = aes_key.try_into().unwrap();
        let plain = ecb::Decryptor::<aes::Aes128>::new(&key.into())
            .decrypt_padded_vec_mut::<Pkcs7>(&sealed)
            .unwrap();
        serde_json::from_slice(&plain).unwrap()
    }

    #[test]
    fn the_holder_of_the_private_key_reads_the_record() {
        let private_key = RsaPrivateKey::new(&mut OsRng, 1024).unwrap();
        let der = private_key.to_public_key().to_public_key_der().unwrap();
        let public_key = BASE64.encode(der.as_bytes());
        let record = json!({ "shell_port": 50001, "key": "secret", "kernel_id": "k1" });
        let payload = seal(&record, &public_key).unwrap();
        assert!(!String::from_utf8_lossy(&payload).contains("secret"));
        assert_eq!(open(&payload, &private_key), record);
        // A fresh AES key each time.
        assert_ne!(seal(&record, &public_key).unwrap(), payload);
    }

    #[test]
    fn a_bad_public_key_is_a_clear_error() {
        let record = json!({});
        assert!(matches!(
            seal(&record, "not base64!"),
            Err(SealError::KeyNotBase64(_))
        ));
        assert!(matches!(
            seal(&record, &BASE64.encode(b"not a key")),
            Err(SealError::KeyNotRsa(_))
        ));
    }
}
