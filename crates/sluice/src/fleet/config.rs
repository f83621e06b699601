//! The `[fleet]` section: how Sluice instances in front of the same servers find each
//! other and agree. Every field is optional: without the section, instances coordinate
//! through the servers themselves.

use crate::admin::config::AdminConfig;
use crate::secret::Secret;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    /// etcd v3 endpoints (`http://host:2379`). Given: etcd holds membership, duties and
    /// the shared runtime state. Empty (default): the servers do, through named locks
    /// and tables in the `sluice` schema on the writer.
    #[serde(default)]
    pub etcd: Vec<String>,
    /// The fleet's name: instances with the same servers (or etcd) and name are one
    /// fleet (with etcd, the key prefix is `/sluice/<name>/`). Default "sluice".
    #[serde(default = "default_name")]
    pub name: String,
    /// This instance's name, as peers and `GET /v1/fleet` show it. Default: the host
    /// name and the first listener's address.
    pub instance: Option<String>,
    /// How long an instance that stops answering keeps its membership and duties (the
    /// etcd lease's time to live): what a survivor waits before acting for a dead
    /// leader. Default "5s".
    #[serde(default = "default_lease", with = "humantime_serde")]
    pub lease: Duration,
    /// How often the shared runtime state is read from the writer when etcd is not
    /// used (with etcd it is watched). Default "100ms".
    #[serde(default = "default_poll", with = "humantime_serde")]
    pub poll: Duration,
    /// `false`: this instance neither joins a fleet nor shares runtime changes (the
    /// writer lock that keeps two instances from promoting two servers stays on).
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The key messages between instances are signed with (HMAC-SHA256). Either this or
    /// `secret_file`; without both, the admin token; without that either, messages go
    /// and are taken unsigned.
    pub secret: Option<Secret>,
    /// File holding the key (surrounding whitespace ignored).
    pub secret_file: Option<PathBuf>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            etcd: Vec::new(),
            name: default_name(),
            instance: None,
            lease: default_lease(),
            poll: default_poll(),
            enabled: true,
            secret: None,
            secret_file: None,
        }
    }
}

fn default_name() -> String {
    "sluice".into()
}

fn default_lease() -> Duration {
    Duration::from_secs(5)
}

fn default_poll() -> Duration {
    Duration::from_millis(100)
}

fn yes() -> bool {
    true
}

impl FleetConfig {
    /// Every problem in the section.
    pub fn validate(&self) -> Vec<String> {
        let mut p = Vec::new();
        for (i, e) in self.etcd.iter().enumerate() {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                p.push(format!(
                    "fleet.etcd[{i}]: {e:?} is not an http:// or https:// endpoint"
                ));
            }
        }
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok {
            p.push(format!(
                "fleet.name: {:?} must be 1 to 32 letters, digits, '-', '_' or '.'",
                self.name
            ));
        }
        if self.lease < Duration::from_secs(2) {
            p.push("fleet.lease: at least 2s (etcd's leases are in whole seconds)".into());
        }
        if self.poll.is_zero() || self.poll > Duration::from_secs(1) {
            p.push("fleet.poll: between 1ms and 1s".into());
        }
        if let Err(e) = self.configured_secret() {
            p.push(e);
        }
        p
    }

    /// The key the section gives (`secret` or `secret_file`).
    pub fn configured_secret(&self) -> Result<Option<Secret>, String> {
        let (secret, what) = match (&self.secret, &self.secret_file) {
            (Some(_), Some(_)) => return Err("fleet: give secret or secret_file, not both".into()),
            (Some(s), None) => (s.0.clone(), "fleet.secret"),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("fleet.secret_file: cannot read {}: {e}", path.display())
                })?;
                (text.trim().to_owned(), "fleet.secret_file")
            }
            (None, None) => return Ok(None),
        };
        match secret.is_empty() {
            true => Err(format!("{what} is empty")),
            false => Ok(Some(Secret(secret))),
        }
    }

    /// The key this instance signs and checks messages with: the section's, else the
    /// admin token however `[admin]` resolves it (peers configured alike share it
    /// already). None: messages go and are taken unsigned.
    pub fn key(&self, admin: &AdminConfig) -> Result<Option<Secret>, String> {
        match self.configured_secret()? {
            Some(secret) => Ok(Some(secret)),
            None => admin.resolved_token(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_endpoints_names_and_durations_are_named() {
        assert!(FleetConfig::default().validate().is_empty());
        let bad = FleetConfig {
            etcd: vec!["10.0.0.5:2379".into()],
            name: "a/b".into(),
            lease: Duration::from_millis(500),
            poll: Duration::ZERO,
            ..FleetConfig::default()
        };
        let problems = bad.validate();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("fleet.etcd[0]"), "{problems:?}");
    }

    fn fleet(toml: &str) -> FleetConfig {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn the_key_is_the_secret_else_the_admin_token() {
        let admin: AdminConfig = toml::from_str("token = \"t0ken\"").unwrap();
        let own = fleet("secret = \"s3cret\"");
        assert!(own.validate().is_empty());
        assert_eq!(own.key(&admin), Ok(Some(Secret("s3cret".into()))));
        assert_eq!(fleet("").key(&admin), Ok(Some(Secret("t0ken".into()))));
        assert!(!format!("{own:?}").contains("s3cret"));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "  from-file\n").unwrap();
        let file = fleet(&format!("secret_file = {:?}", path.to_str().unwrap()));
        assert_eq!(file.key(&admin), Ok(Some(Secret("from-file".into()))));

        let problems = |toml: &str| fleet(toml).validate();
        assert!(problems("secret = \"\"")[0].contains("fleet.secret is empty"));
        assert!(problems("secret = \"a\"\nsecret_file = \"/x\"")[0].contains("not both"));
        assert!(problems("secret_file = \"/nonexistent/secret\"")[0].contains("cannot read"));
    }
}
