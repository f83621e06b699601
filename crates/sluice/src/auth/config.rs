//! The `[[users]]` section and the authentication plugins a user or a listener can
//! name. Checked by `validate()` with the rest of the configuration.

use crate::secret::Secret;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
pub enum AuthPlugin {
    #[default]
    #[serde(rename = "mysql_native_password")]
    Native,
    #[serde(rename = "caching_sha2_password")]
    CachingSha2,
    /// MariaDB's `ed25519` (`client_ed25519` in the protocol).
    #[serde(rename = "client_ed25519", alias = "ed25519")]
    Ed25519,
}

impl AuthPlugin {
    pub fn name(self) -> &'static str {
        match self {
            AuthPlugin::Native => sluice_wire::auth::NATIVE_PASSWORD,
            AuthPlugin::CachingSha2 => sluice_wire::auth::CACHING_SHA2_PASSWORD,
            AuthPlugin::Ed25519 => sluice_wire::auth::CLIENT_ED25519,
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// Plain password. Either this or `password_hash`.
    pub password: Option<Secret>,
    /// Stored form, as in `mysql.user`: "*" and 40 hex digits (`mysql_native_password`),
    /// or the base64 public key for `client_ed25519`.
    pub password_hash: Option<String>,
    /// Plugin this user authenticates with. Default "mysql_native_password".
    #[serde(default)]
    pub auth_plugin: AuthPlugin,
    /// Account Sluice logs in as on the backends. Default: `name`.
    pub backend_user: Option<String>,
    /// Password for `backend_user`. Default: `password`.
    pub backend_password: Option<Secret>,
    /// Most client connections of this user at once; more get error 1203. Default:
    /// `limits.max_user_connections`.
    pub max_connections: Option<u32>,
}

impl std::fmt::Debug for UserConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConfig")
            .field("name", &self.name)
            .field("auth_plugin", &self.auth_plugin)
            .field("backend_user", &self.backend_user)
            .finish_non_exhaustive()
    }
}
