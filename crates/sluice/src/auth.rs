//! Who may log in to Sluice, how their proofs are checked, and what credentials their
//! backend connections use. The frontend drives the exchange; this module decides.

use crate::config::{AuthPlugin, Secret, UserConfig};
use parking_lot::Mutex;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use sluice_wire::auth as wire;
use std::collections::HashMap;
use std::sync::Arc;

/// One configured account.
pub struct User {
    pub name: String,
    pub plugin: AuthPlugin,
    /// SHA1(SHA1(password)), what `mysql_native_password` verifies against.
    native_hash: [u8; 20],
    /// SHA256(SHA256(password)) for the `caching_sha2_password` fast path: known up front
    /// for plain passwords, learnt after the first full authentication otherwise.
    sha2_cache: Mutex<Option<[u8; 32]>>,
    /// Shared by every pool key of this user: keys then compare by pointer.
    pub backend: std::sync::Arc<BackendCredentials>,
    /// This user's own client connection limit, if set.
    pub max_connections: Option<u32>,
}

/// The account a user's backend connections log in as.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BackendCredentials {
    pub user: String,
    pub password: Secret,
}

impl std::fmt::Debug for BackendCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BackendCredentials({})", self.user)
    }
}

/// Parses "*" + 40 hex digits into the 20-byte stored hash.
pub fn parse_native_hash(s: &str) -> Option<[u8; 20]> {
    let hex = s.strip_prefix('*')?;
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl User {
    /// Builds a user from validated configuration.
    pub fn from_config(c: &UserConfig) -> User {
        let (native_hash, sha2) = match (&c.password, &c.password_hash) {
            (Some(pw), _) => (
                wire::native_stored_hash(pw.0.as_bytes()),
                Some(wire::sha2_cached_hash(pw.0.as_bytes())),
            ),
            (None, Some(h)) => (parse_native_hash(h).unwrap_or([0; 20]), None),
            (None, None) => ([0; 20], None),
        };
        let backend_password = c
            .backend_password
            .clone()
            .or_else(|| c.password.clone())
            .unwrap_or(Secret(String::new()));
        User {
            name: c.name.clone(),
            plugin: c.auth_plugin,
            native_hash,
            sha2_cache: Mutex::new(sha2),
            backend: std::sync::Arc::new(BackendCredentials {
                user: c.backend_user.clone().unwrap_or_else(|| c.name.clone()),
                password: backend_password,
            }),
            max_connections: c.max_connections,
        }
    }

    /// Checks a `mysql_native_password` response to `nonce`.
    pub fn verify_native(&self, nonce: &[u8], response: &[u8]) -> bool {
        if response.is_empty() {
            return self.native_hash == wire::native_stored_hash(b"");
        }
        wire::native_verify(&self.native_hash, nonce, response).is_some()
    }

    /// Checks a `caching_sha2_password` fast-path response. `None`: no cached hash yet,
    /// so full authentication is needed.
    pub fn verify_sha2_fast(&self, nonce: &[u8], response: &[u8]) -> Option<bool> {
        let cached = (*self.sha2_cache.lock())?;
        Some(wire::sha2_verify(&cached, nonce, response))
    }

    /// Checks a password received in full (over TLS or RSA), and caches it for the fast path.
    pub fn verify_cleartext(&self, password: &[u8]) -> bool {
        let ok = wire::native_stored_hash(password) == self.native_hash;
        if ok {
            *self.sha2_cache.lock() = Some(wire::sha2_cached_hash(password));
        }
        ok
    }
}

/// The user list, swapped whole on reload.
#[derive(Default)]
pub struct Users {
    by_name: HashMap<String, Arc<User>>,
}

impl Users {
    pub fn from_config(users: &[UserConfig]) -> Users {
        Users {
            by_name: users
                .iter()
                .map(|u| (u.name.clone(), Arc::new(User::from_config(u))))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.by_name.get(name).cloned()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<User>> {
        self.by_name.values()
    }
}

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

    fn user(password: Option<&str>, hash: Option<&str>) -> User {
        User::from_config(&UserConfig {
            name: "u".into(),
            password: password.map(|p| Secret(p.into())),
            password_hash: hash.map(String::from),
            auth_plugin: AuthPlugin::CachingSha2,
            backend_user: None,
            backend_password: Some(Secret("b".into())),
            max_connections: None,
        })
    }

    #[test]
    fn hash_only_user_learns_sha2_after_full_auth() {
        let u = user(None, Some("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"));
        let nonce = wire::new_scramble();
        assert!(u.verify_native(&nonce, &wire::native_scramble(b"secret", &nonce)));
        assert_eq!(
            u.verify_sha2_fast(&nonce, &wire::sha2_scramble(b"secret", &nonce)),
            None
        );
        assert!(!u.verify_cleartext(b"wrong"));
        assert!(u.verify_cleartext(b"secret"));
        assert_eq!(
            u.verify_sha2_fast(&nonce, &wire::sha2_scramble(b"secret", &nonce)),
            Some(true)
        );
        assert_eq!(
            u.verify_sha2_fast(&nonce, &wire::sha2_scramble(b"nope", &nonce)),
            Some(false)
        );
    }

    #[test]
    fn rsa_round_trip() {
        let key = RsaKey::generate().unwrap();
        let nonce = wire::new_scramble();
        let ct = rsa_encrypt_password(key.public_pem().as_bytes(), b"s3cret", &nonce).unwrap();
        assert_eq!(key.decrypt_password(&ct, &nonce).unwrap(), b"s3cret");
        assert_eq!(key.decrypt_password(b"garbage", &nonce), None);
    }

    #[test]
    fn native_hash_parsing() {
        assert!(parse_native_hash("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_some());
        assert!(parse_native_hash("14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
        assert!(parse_native_hash("*14E6").is_none());
        assert!(parse_native_hash("*ZZE65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
    }
}
