//! The `[fleet]` section: how Sluice instances in front of the same servers find each
//! other and agree. Every field is optional: without the section, instances coordinate
//! through the servers themselves.

use serde::Deserialize;
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
        p
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
}
