//! The `[admin]` section: where the admin API listens and the token it asks for.

use crate::secret::Secret;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Environment variable holding the admin token when the file gives none.
pub const ADMIN_TOKEN_ENV: &str = "SLUICE_ADMIN_TOKEN";

/// The admin HTTP API. Off unless a token is configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address the admin API listens on. Default "127.0.0.1:6080".
    #[serde(default = "default_admin_address")]
    pub address: String,
    /// Bearer token clients must present. Either this or `token_file`; without both, the
    /// `SLUICE_ADMIN_TOKEN` environment variable; without any, the admin API is off.
    pub token: Option<Secret>,
    /// File holding the token (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
    /// Allow a non-loopback `address`. Default false: the API is plain HTTP.
    #[serde(default)]
    pub allow_remote: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            address: default_admin_address(),
            token: None,
            token_file: None,
            allow_remote: false,
        }
    }
}

fn default_admin_address() -> String {
    "127.0.0.1:6080".into()
}

impl AdminConfig {
    /// The token to serve with: `token`, else `token_file`'s content, else the
    /// `SLUICE_ADMIN_TOKEN` environment variable (an empty one counts as unset).
    /// `None`: the admin API stays off.
    pub fn resolved_token(&self) -> Result<Option<Secret>, String> {
        if let Some(token) = self.configured_token()? {
            return Ok(Some(token));
        }
        match std::env::var(ADMIN_TOKEN_ENV) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => check_admin_token(v.trim(), ADMIN_TOKEN_ENV).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(format!("{ADMIN_TOKEN_ENV} is not valid UTF-8"))
            }
        }
    }

    /// The token the file gives (`token` or `token_file`), ignoring the environment.
    pub fn configured_token(&self) -> Result<Option<Secret>, String> {
        match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => Err("admin: give token or token_file, not both".into()),
            (Some(t), None) => check_admin_token(&t.0, "admin.token").map(Some),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("admin.token_file: cannot read {}: {e}", path.display())
                })?;
                check_admin_token(text.trim(), "admin.token_file").map(Some)
            }
            (None, None) => Ok(None),
        }
    }
}

/// Tokens travel in an HTTP header, so only visible ASCII survives the trip intact.
fn check_admin_token(token: &str, what: &str) -> Result<Secret, String> {
    if token.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{what} may only contain visible ASCII characters (no spaces)"
        ));
    }
    Ok(Secret(token.to_owned()))
}

impl AdminConfig {
    /// Problems in the section, each naming the setting.
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        match self.address.parse::<SocketAddr>() {
            Err(_) => p.push(format!(
                "admin.address: {:?} is not an IP:port address",
                self.address
            )),
            Ok(a) if !a.ip().is_loopback() && !self.allow_remote => p.push(format!(
                "admin.address: {a} is not a loopback address; the admin API is plain HTTP, \
                 set admin.allow_remote = true to serve it to other hosts anyway"
            )),
            Ok(_) => {}
        }
        if let Err(e) = self.configured_token() {
            p.push(e);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin_config(toml: &str) -> AdminConfig {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn admin_config_defaults_and_validation() {
        let c = admin_config("");
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.address, "127.0.0.1:6080");
        assert_eq!(c.configured_token(), Ok(None));

        let c = admin_config("token = \"t0ken\"\naddress = \"[::1]:7000\"");
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.resolved_token(), Ok(Some(Secret("t0ken".into()))));

        let problems = |toml: &str| admin_config(toml).validate();
        assert!(problems("address = \"localhost\"")[0].contains("admin.address"));
        assert!(problems("address = \"0.0.0.0:6080\"")[0].contains("allow_remote"));
        assert!(problems("address = \"0.0.0.0:6080\"\nallow_remote = true").is_empty());
        assert!(problems("token = \"\"")[0].contains("admin.token is empty"));
        assert!(problems("token = \"a b\"")[0].contains("visible ASCII"));
        assert!(problems("token = \"a\"\ntoken_file = \"/nonexistent\"")[0].contains("not both"));
        assert!(problems("token_file = \"/nonexistent/token\"")[0].contains("cannot read"));
        assert!(toml::from_str::<AdminConfig>("tokn = \"x\"").is_err());
    }

    #[test]
    fn token_file_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  from-file\n").unwrap();
        let c = admin_config(&format!("token_file = {:?}", path.to_str().unwrap()));
        assert_eq!(c.validate(), Vec::<String>::new());
        assert_eq!(c.configured_token(), Ok(Some(Secret("from-file".into()))));
        std::fs::write(&path, "\n").unwrap();
        assert!(c.validate()[0].contains("admin.token_file is empty"));
    }

    #[test]
    fn the_secret_is_not_printed() {
        let c = admin_config("token = \"hunter2\"");
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
