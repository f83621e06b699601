//! What the read-routing benchmarks (routing, zones) read from Sluice and from the
//! servers around a run: Sluice's admin API (the roles its monitor gives, its routing
//! counters) and each server's own `Com_select`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;
use sluice_sandbox::MariaDb;

/// How long the monitor gets to find the writer and the readers after Sluice starts.
const ROUTING_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until Sluice's monitor has elected the first of `names` as the writer and sees
/// every other one as a reader; the role of each server, in that order.
pub(crate) fn wait_for_routing(admin: &AdminApi, names: &[&str]) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + ROUTING_READY_TIMEOUT;
    loop {
        let last = servers_json(admin);
        if let Ok(json) = &last {
            let roles: Vec<String> = names
                .iter()
                .map(|name| {
                    server_entry(json, name)
                        .and_then(|s| s["role"].as_str())
                        .unwrap_or("missing")
                        .to_string()
                })
                .collect();
            if json["writer"] == names[0] && roles[1..].iter().all(|r| r == "reader") {
                return Ok(roles);
            }
        }
        if Instant::now() >= deadline {
            let last = match last {
                Ok(json) => json.to_string(),
                Err(e) => format!("{e:#}"),
            };
            bail!(
                "Sluice did not route within {ROUTING_READY_TIMEOUT:?} ({} as writer, \
                 every other server a reader); /v1/servers said: {last}",
                names[0]
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Sluice's admin API as this benchmark reads it: `GET` with the run's token.
pub(crate) struct AdminApi {
    agent: ureq::Agent,
    /// "host:port".
    address: String,
    token: String,
}

impl AdminApi {
    pub(crate) fn new(address: String, token: String) -> AdminApi {
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(30)))
            // A refusal's status and body are part of the error message we build.
            .http_status_as_error(false)
            .build()
            .into();
        AdminApi {
            agent,
            address,
            token,
        }
    }

    /// The status and the body of `GET path`.
    fn get(&self, path: &str) -> anyhow::Result<(ureq::http::StatusCode, String)> {
        let mut response = self
            .agent
            .get(format!("http://{}{path}", self.address))
            .header("Authorization", format!("Bearer {}", self.token))
            .call()?;
        let body = response.body_mut().read_to_string()?;
        Ok((response.status(), body))
    }
}

impl AdminApi {
    /// `GET path`, answered 200 with text (`/metrics`).
    pub(crate) fn get_text(&self, path: &str) -> anyhow::Result<String> {
        let (status, body) = self
            .get(path)
            .with_context(|| format!("asking Sluice's admin API for {path}"))?;
        if status != 200 {
            bail!("{path} answered {status}: {body}");
        }
        Ok(body)
    }

    /// `GET path`, answered 200 with JSON.
    pub(crate) fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let (status, body) = self
            .get(path)
            .with_context(|| format!("asking Sluice's admin API for {path}"))?;
        if status != 200 {
            bail!("{path} answered {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("{path} is not JSON"))
    }
}

/// `GET /v1/servers`.
pub(crate) fn servers_json(admin: &AdminApi) -> anyhow::Result<Value> {
    admin.get_json("/v1/servers")
}

pub(crate) fn server_entry<'a>(json: &'a Value, name: &str) -> Option<&'a Value> {
    json["servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

/// The counters read around a run.
pub(crate) struct Snapshot {
    /// Sluice's `reads` per server, in the order of the names taken; `None` for direct
    /// runs.
    pub(crate) reads: Option<Vec<Option<u64>>>,
    /// Sluice's `writes` per server: what it sent the writer as such (every statement,
    /// with the split off).
    pub(crate) writes: Option<Vec<Option<u64>>>,
    /// Sluice's time to first byte per server, which its balancing weighs.
    pub(crate) ttfb_ms: Option<Vec<Option<f64>>>,
    pub(crate) com_select: Vec<Option<u64>>,
    pub(crate) reads_to_readers: Option<u64>,
    pub(crate) reads_to_writer: Option<u64>,
}

impl Snapshot {
    /// The counters of the servers `names` (Sluice's) and `databases` (their own), in
    /// the same order; Sluice's only when `admin` is given.
    pub(crate) fn take(
        names: &[&str],
        databases: &[&MariaDb],
        admin: Option<&AdminApi>,
    ) -> Snapshot {
        let json = admin.and_then(|a| servers_json(a).ok());
        let stat = |key: &str| json.as_ref().and_then(|j| j["stats"][key].as_u64());
        let per_server = |key: &str| {
            names
                .iter()
                .map(|name| {
                    json.as_ref()
                        .and_then(|j| server_entry(j, name))
                        .and_then(|s| s[key].as_f64())
                })
                .collect::<Vec<_>>()
        };
        let counts = |key: &str| {
            admin.map(|_| {
                per_server(key)
                    .into_iter()
                    .map(|r| r.map(|r| r as u64))
                    .collect()
            })
        };
        Snapshot {
            reads: counts("reads"),
            writes: counts("writes"),
            ttfb_ms: admin.map(|_| per_server("ttfb_ms")),
            com_select: databases
                .iter()
                .map(|d| {
                    d.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
                        .ok()
                        .and_then(|out| status_value(&out))
                })
                .collect(),
            reads_to_readers: stat("reads_to_readers"),
            reads_to_writer: stat("reads_to_writer"),
        }
    }
}

/// The value of a `SHOW GLOBAL STATUS LIKE ...` answer in batch mode (a header line,
/// then `name<TAB>value`).
pub(crate) fn status_value(out: &str) -> Option<u64> {
    last_line(out)?.split_whitespace().last()?.parse().ok()
}

pub(crate) fn last_line(out: &str) -> Option<String> {
    out.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(String::from)
}

pub(crate) fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_values_come_from_batch_output() {
        assert_eq!(
            status_value("Variable_name\tValue\nCom_select\t1234\n"),
            Some(1234)
        );
        assert_eq!(status_value(""), None);
        assert_eq!(delta(Some(10), Some(25)), Some(15));
        assert_eq!(delta(None, Some(25)), None);
    }
}
