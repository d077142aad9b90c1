//! The RSA key pair `caching_sha2_password` clients encrypt their password with when the
//! connection is not TLS (MySQL's "RSA public key exchange").

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::rand_core::OsRng;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPrivateKey};
use sha2::{Digest, Sha256};

pub struct RsaKey {
    private: RsaPrivateKey,
    /// SubjectPublicKeyInfo PEM, as clients ask for it.
    pub public_pem: String,
    /// SHA-256 of the public key (DER), hex: what the log shows to compare with a client's copy.
    pub fingerprint: String,
}

impl std::fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsaKey")
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl RsaKey {
    fn from_private(private: RsaPrivateKey) -> Result<RsaKey, String> {
        let public = private.to_public_key();
        let public_pem = public
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| e.to_string())?;
        let der = public.to_public_key_der().map_err(|e| e.to_string())?;
        let fingerprint = Sha256::digest(der.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(RsaKey {
            private,
            public_pem,
            fingerprint,
        })
    }

    /// A fresh 2048-bit key pair.
    pub fn generate() -> Result<RsaKey, String> {
        let private = RsaPrivateKey::new(&mut OsRng, 2048).map_err(|e| e.to_string())?;
        Self::from_private(private)
    }

    /// A private key from a PEM file (PKCS#8 or PKCS#1).
    pub fn load(path: &str) -> Result<RsaKey, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("server.rsa.private_key {path}: {e}"))?;
        let private = RsaPrivateKey::from_pkcs8_pem(&text)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(&text))
            .map_err(|e| format!("server.rsa.private_key {path}: not an RSA private key: {e}"))?;
        Self::from_private(private)
    }

    /// The password a client sent encrypted: RSA (OAEP with SHA-1 as MySQL's clients use, or
    /// PKCS#1 v1.5 as some older ones do) of the NUL-terminated password XOR the scramble.
    pub fn decrypt_password(&self, ciphertext: &[u8], scramble: &[u8]) -> Option<Vec<u8>> {
        let plain = self
            .private
            .decrypt_blinded(&mut OsRng, Oaep::new::<sha1::Sha1>(), ciphertext)
            .or_else(|_| {
                self.private
                    .decrypt_blinded(&mut OsRng, Pkcs1v15Encrypt, ciphertext)
            })
            .ok()?;
        if scramble.is_empty() {
            return None;
        }
        let mut pw: Vec<u8> = plain
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ scramble[i % scramble.len()])
            .collect();
        if pw.last() == Some(&0) {
            pw.pop();
        }
        Some(pw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::RsaPublicKey;
    use rsa::pkcs8::DecodePublicKey;

    #[test]
    fn decrypts_what_a_client_encrypts() {
        let key = RsaKey::generate().unwrap();
        let public = RsaPublicKey::from_public_key_pem(&key.public_pem).unwrap();
        let scramble = b"abcdefghijklmnopqrst";
        let mut msg = b"s3cret".to_vec();
        msg.push(0);
        let xored: Vec<u8> = msg
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ scramble[i % 20])
            .collect();
        let ct = public
            .encrypt(&mut OsRng, Oaep::new::<sha1::Sha1>(), &xored)
            .unwrap();
        assert_eq!(key.decrypt_password(&ct, scramble).unwrap(), b"s3cret");
        let ct = public.encrypt(&mut OsRng, Pkcs1v15Encrypt, &xored).unwrap();
        assert_eq!(key.decrypt_password(&ct, scramble).unwrap(), b"s3cret");
        assert!(key.decrypt_password(&[1, 2, 3], scramble).is_none());
        assert_eq!(key.fingerprint.len(), 64);
    }
}
