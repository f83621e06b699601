//! The RSA key `caching_sha2_password` uses without TLS: Sluice's own towards clients,
//! and a server's public key when Sluice logs in to it.

use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sluice_wire::auth as wire;

/// The RSA key pair offered to `caching_sha2_password` clients that have no TLS.
pub struct RsaKey {
    private: RsaPrivateKey,
    public_pem: String,
}

impl RsaKey {
    pub fn generate() -> anyhow::Result<RsaKey> {
        let private = RsaPrivateKey::new(&mut rand::thread_rng(), 2048)?;
        Self::from_private(private)
    }

    pub fn load(path: &std::path::Path) -> anyhow::Result<RsaKey> {
        let pem = std::fs::read_to_string(path)?;
        let private = RsaPrivateKey::from_pkcs8_pem(&pem)
            .or_else(|_| {
                use rsa::pkcs1::DecodeRsaPrivateKey;
                RsaPrivateKey::from_pkcs1_pem(&pem)
            })
            .map_err(|e| anyhow::anyhow!("{}: not an RSA private key: {e}", path.display()))?;
        Self::from_private(private)
    }

    fn from_private(private: RsaPrivateKey) -> anyhow::Result<RsaKey> {
        let public_pem = RsaPublicKey::from(&private).to_public_key_pem(LineEnding::LF)?;
        Ok(RsaKey {
            private,
            public_pem,
        })
    }

    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// Decrypts a client's RSA-encrypted password and removes the nonce mask and NUL.
    pub fn decrypt_password(&self, ciphertext: &[u8], nonce: &[u8]) -> Option<Vec<u8>> {
        let plain = self
            .private
            .decrypt(Oaep::new::<sha1::Sha1>(), ciphertext)
            .ok()?;
        let mut pw = wire::xor_password_with_nonce(&plain, nonce);
        // Unmasking appended our own NUL; the client's NUL terminator precedes it.
        pw.pop();
        if pw.last() == Some(&0) {
            pw.pop();
        }
        Some(pw)
    }
}

/// Encrypts a password for a server's `caching_sha2_password` full authentication.
pub fn rsa_encrypt_password(
    public_pem: &[u8],
    password: &[u8],
    nonce: &[u8],
) -> anyhow::Result<Vec<u8>> {
    use rsa::pkcs8::DecodePublicKey;
    let pem = std::str::from_utf8(public_pem)?.trim_end_matches('\0');
    let key = RsaPublicKey::from_public_key_pem(pem).or_else(|_| {
        use rsa::pkcs1::DecodeRsaPublicKey;
        RsaPublicKey::from_pkcs1_pem(pem)
    })?;
    let masked = wire::xor_password_with_nonce(password, nonce);
    Ok(key.encrypt(&mut rand::thread_rng(), Oaep::new::<sha1::Sha1>(), &masked)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_round_trip() {
        let key = RsaKey::generate().unwrap();
        let nonce = wire::new_scramble();
        let ct = rsa_encrypt_password(key.public_pem().as_bytes(), b"s3cret", &nonce).unwrap();
        assert_eq!(key.decrypt_password(&ct, &nonce).unwrap(), b"s3cret");
        assert_eq!(key.decrypt_password(b"garbage", &nonce), None);
    }
}
