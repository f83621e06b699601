//! Who may log in to Sluice, how their proofs are checked, and what credentials their
//! backend connections use. The frontend drives the exchange; this module decides.
//! Users come from `[[users]]` and, in [`accounts`], from the servers' own account tables.

pub mod accounts;
pub mod config;
pub mod host;
mod rsa;

pub use self::rsa::{rsa_encrypt_password, RsaKey};

use crate::secret::Secret;
use config::{AuthPlugin, UserConfig};
use parking_lot::Mutex;
use sluice_wire::auth as wire;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a user was defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A `[[users]]` entry: its backend credentials are configured.
    Config,
    /// An account read from the servers: its backend credentials come from each
    /// client's proof (see [`Proof`]).
    Server,
}

/// One account clients may log in as.
pub struct User {
    pub name: String,
    /// The account's host pattern (`%` for `[[users]]`).
    pub host: String,
    pub plugin: AuthPlugin,
    pub origin: Origin,
    /// SHA1(SHA1(password)), what `mysql_native_password` verifies against.
    native_hash: Option<[u8; 20]>,
    /// The `ed25519` public key of the password.
    ed25519_key: Option<[u8; 32]>,
    /// SHA256(SHA256(password)) for the `caching_sha2_password` fast path: known up front
    /// for plain passwords, learnt after the first full authentication otherwise.
    sha2_cache: Mutex<Option<[u8; 32]>>,
    /// Shared by every pool key of this user: keys then compare by pointer. For server
    /// accounts, a placeholder until a client's proof gives the real ones.
    pub backend: Arc<BackendCredentials>,
    /// This user's own client connection limit, if set.
    pub max_connections: Option<u32>,
}

/// SHA1(password): what a verified `mysql_native_password` scramble reveals, and all
/// a `mysql_native_password` login to a server needs. Never printed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NativeStage1(pub [u8; 20]);

impl std::fmt::Debug for NativeStage1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeStage1(***)")
    }
}

/// The account a user's backend connections log in as.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BackendCredentials {
    pub user: String,
    pub password: Secret,
    /// Set for server accounts whose clients proved a `mysql_native_password`: the
    /// password itself is then unknown (empty) and only that plugin can log in.
    pub native_stage1: Option<NativeStage1>,
}

impl std::fmt::Debug for BackendCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BackendCredentials({})", self.user)
    }
}

impl BackendCredentials {
    pub fn new(user: impl Into<String>, password: Secret) -> BackendCredentials {
        BackendCredentials {
            user: user.into(),
            password,
            native_stage1: None,
        }
    }

    /// Whether the password itself is known (any plugin can log in).
    pub fn has_password(&self) -> bool {
        self.native_stage1.is_none()
    }

    /// The `mysql_native_password` answer to a server's `nonce`.
    pub fn native_response(&self, nonce: &[u8]) -> Vec<u8> {
        match &self.native_stage1 {
            Some(stage1) => wire::native_scramble_from_stage1(&stage1.0, nonce),
            None => wire::native_scramble(self.password.0.as_bytes(), nonce),
        }
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

/// Parses MariaDB's stored `ed25519` form: the public key in base64 (43 characters, no
/// padding), as `mysql.global_priv` holds it and `ED25519_PASSWORD()` returns it.
pub fn parse_ed25519_key(s: &str) -> Option<[u8; 32]> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(s.trim_end_matches('='))
        .ok()?;
    bytes.try_into().ok()
}

/// How a client proves who it is, given its account and connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    Native,
    CachingSha2,
    Ed25519,
    /// The password itself, over TLS (`mysql_clear_password`): for server accounts whose
    /// plugin lets Sluice verify but not log in to the server without it.
    Cleartext,
}

/// What a successful verification leaves for the backend login.
pub enum Proof {
    /// Nothing: the backend credentials are configured.
    Configured,
    Native(NativeStage1),
    Password(Secret),
}

impl User {
    /// Builds a user from validated configuration.
    pub fn from_config(c: &UserConfig) -> User {
        let (mut native_hash, mut sha2, mut ed25519_key) = (None, None, None);
        match (&c.password, &c.password_hash) {
            (Some(pw), _) => {
                let pw = pw.0.as_bytes();
                native_hash = Some(wire::native_stored_hash(pw));
                sha2 = Some(wire::sha2_cached_hash(pw));
                ed25519_key = Some(wire::ed25519_public_key(pw));
            }
            (None, Some(h)) if c.auth_plugin == AuthPlugin::Ed25519 => {
                ed25519_key = parse_ed25519_key(h);
            }
            (None, Some(h)) => native_hash = parse_native_hash(h),
            (None, None) => {}
        }
        let backend_password = c
            .backend_password
            .clone()
            .or_else(|| c.password.clone())
            .unwrap_or(Secret(String::new()));
        User {
            name: c.name.clone(),
            host: "%".into(),
            plugin: c.auth_plugin,
            origin: Origin::Config,
            native_hash,
            ed25519_key,
            sha2_cache: Mutex::new(sha2),
            backend: Arc::new(BackendCredentials::new(
                c.backend_user.clone().unwrap_or_else(|| c.name.clone()),
                backend_password,
            )),
            max_connections: c.max_connections,
        }
    }

    /// A server account: `name`@`host` with `plugin` and its stored form. `None` for
    /// plugins Sluice cannot verify (see docs/OPERATIONS.md).
    pub fn from_server(name: &str, host: &str, plugin: &str, stored: &str) -> Option<User> {
        let (plugin, native_hash, ed25519_key) = match plugin {
            // MariaDB leaves the plugin out of accounts made before 10.4.
            "" | wire::NATIVE_PASSWORD if stored.is_empty() => (
                AuthPlugin::Native,
                Some(wire::native_stored_hash(b"")),
                None,
            ),
            "" | wire::NATIVE_PASSWORD => {
                (AuthPlugin::Native, Some(parse_native_hash(stored)?), None)
            }
            "ed25519" => (AuthPlugin::Ed25519, None, Some(parse_ed25519_key(stored)?)),
            _ => return None,
        };
        Some(User {
            name: name.to_owned(),
            host: host.to_owned(),
            plugin,
            origin: Origin::Server,
            native_hash,
            ed25519_key,
            sha2_cache: Mutex::new(None),
            backend: Arc::new(BackendCredentials::new(name, Secret(String::new()))),
            max_connections: None,
        })
    }

    /// Whether two definitions verify the same passwords the same way.
    pub fn same_secret(&self, other: &User) -> bool {
        self.plugin == other.plugin
            && self.native_hash == other.native_hash
            && self.ed25519_key == other.ed25519_key
    }

    /// How a client on a secure connection (TLS, the Unix socket) or not proves it is
    /// this user; `None`: it cannot log in through Sluice (the reason is logged by the
    /// caller).
    pub fn exchange(&self, secure: bool) -> Option<Exchange> {
        match (self.plugin, self.origin) {
            (AuthPlugin::Native, _) => Some(Exchange::Native),
            (AuthPlugin::CachingSha2, _) => Some(Exchange::CachingSha2),
            (AuthPlugin::Ed25519, Origin::Config) => Some(Exchange::Ed25519),
            // Sluice can check a signature but not make one for the server: only the
            // password itself lets it log in there, and only a secure transport (TLS,
            // the Unix socket) may carry it.
            (AuthPlugin::Ed25519, Origin::Server) => secure.then_some(Exchange::Cleartext),
        }
    }

    /// Checks a `mysql_native_password` response to `nonce`.
    pub fn verify_native(&self, nonce: &[u8], response: &[u8]) -> Option<Proof> {
        let stored = self.native_hash.as_ref()?;
        if response.is_empty() {
            return (*stored == wire::native_stored_hash(b""))
                .then(|| Proof::Password(Secret(String::new())));
        }
        let stage1 = wire::native_verify(stored, nonce, response)?;
        Some(match self.origin {
            Origin::Config => Proof::Configured,
            Origin::Server => Proof::Native(NativeStage1(stage1)),
        })
    }

    /// Checks a `client_ed25519` signature of `nonce`.
    pub fn verify_ed25519(&self, nonce: &[u8], signature: &[u8]) -> bool {
        self.ed25519_key
            .as_ref()
            .is_some_and(|key| wire::ed25519_verify(key, nonce, signature))
    }

    /// Checks a `caching_sha2_password` fast-path response. `None`: no cached hash yet,
    /// so full authentication is needed.
    pub fn verify_sha2_fast(&self, nonce: &[u8], response: &[u8]) -> Option<bool> {
        let cached = (*self.sha2_cache.lock())?;
        Some(wire::sha2_verify(&cached, nonce, response))
    }

    /// Checks a password received in full (over TLS or RSA), and caches it for the fast path.
    pub fn verify_cleartext(&self, password: &[u8]) -> bool {
        let ok = match self.plugin {
            AuthPlugin::Ed25519 => self.ed25519_key == Some(wire::ed25519_public_key(password)),
            _ => self.native_hash == Some(wire::native_stored_hash(password)),
        };
        if ok {
            *self.sha2_cache.lock() = Some(wire::sha2_cached_hash(password));
        }
        ok
    }

    /// The user a session runs as once `proof` was accepted: this one for `[[users]]`;
    /// for a server account, a copy whose backend login is the client's own.
    pub fn logged_in(self: &Arc<Self>, proof: Proof) -> Arc<User> {
        let backend = match (self.origin, proof) {
            (Origin::Config, _) | (_, Proof::Configured) => return self.clone(),
            (Origin::Server, Proof::Native(stage1)) => BackendCredentials {
                user: self.name.clone(),
                password: Secret(String::new()),
                native_stage1: Some(stage1),
            },
            (Origin::Server, Proof::Password(pw)) => BackendCredentials::new(&self.name, pw),
        };
        Arc::new(User {
            name: self.name.clone(),
            host: self.host.clone(),
            plugin: self.plugin,
            origin: self.origin,
            native_hash: self.native_hash,
            ed25519_key: self.ed25519_key,
            sha2_cache: Mutex::new(None),
            backend: Arc::new(backend),
            max_connections: self.max_connections,
        })
    }
}

/// The `[[users]]` list, swapped whole on reload.
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

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
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
        assert!(u
            .verify_native(&nonce, &wire::native_scramble(b"secret", &nonce))
            .is_some());
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
    fn server_native_account_yields_what_the_backend_login_needs() {
        let stored = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"; // PASSWORD('secret')
        let u = Arc::new(User::from_server("u", "%", "mysql_native_password", stored).unwrap());
        let nonce = wire::new_scramble();
        assert!(u
            .verify_native(&nonce, &wire::native_scramble(b"nope", &nonce))
            .is_none());
        let proof = u
            .verify_native(&nonce, &wire::native_scramble(b"secret", &nonce))
            .unwrap();
        let session = u.logged_in(proof);
        let server_nonce = wire::new_scramble();
        assert_eq!(
            session.backend.native_response(&server_nonce),
            wire::native_scramble(b"secret", &server_nonce)
        );
        assert!(!session.backend.has_password());
        assert!(format!("{:?}", session.backend.native_stage1).contains("***"));
    }

    #[test]
    fn server_accounts_sluice_cannot_verify_are_left_out() {
        assert!(User::from_server("u", "%", "unix_socket", "").is_none());
        assert!(User::from_server("u", "%", "mysql_native_password", "garbage").is_none());
        let empty = User::from_server("root", "localhost", "", "").unwrap();
        assert!(empty.verify_native(&wire::new_scramble(), &[]).is_some());
    }

    #[test]
    fn ed25519_server_account_needs_tls_and_checks_the_password() {
        let key = "ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY"; // ED25519 of 'secret'
        let u = User::from_server("e", "%", "ed25519", key).unwrap();
        assert_eq!(u.exchange(false), None);
        assert_eq!(u.exchange(true), Some(Exchange::Cleartext));
        assert!(u.verify_cleartext(b"secret"));
        assert!(!u.verify_cleartext(b"secreT"));
        let nonce = wire::new_ed25519_nonce();
        assert!(u.verify_ed25519(&nonce, &wire::ed25519_sign(b"secret", &nonce)));
    }

    #[test]
    fn ed25519_config_user_from_its_stored_key() {
        let u = User::from_config(&UserConfig {
            name: "e".into(),
            password: None,
            password_hash: Some("ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY".into()),
            auth_plugin: AuthPlugin::Ed25519,
            backend_user: None,
            backend_password: Some(Secret("b".into())),
            max_connections: None,
        });
        assert_eq!(u.exchange(false), Some(Exchange::Ed25519));
        let nonce = wire::new_ed25519_nonce();
        assert!(u.verify_ed25519(&nonce, &wire::ed25519_sign(b"secret", &nonce)));
        assert!(!u.verify_ed25519(&nonce, &wire::ed25519_sign(b"other", &nonce)));
        assert!(u.verify_native(&nonce[..20], &[]).is_none());
    }

    #[test]
    fn native_hash_parsing() {
        assert!(parse_native_hash("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_some());
        assert!(parse_native_hash("14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
        assert!(parse_native_hash("*14E6").is_none());
        assert!(parse_native_hash("*ZZE65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
    }
}
