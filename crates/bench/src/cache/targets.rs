//! The existing servers `sluice bench cache` is told to target, one flag group per
//! scenario, and the scenarios they make.

use anyhow::bail;

use super::{CacheArgs, Scenario};
use crate::dedup;
use crate::topology::{SluiceTarget, Target};

/// The existing servers the flags name; all `None` for the embedded topology.
pub(super) struct Targets {
    pub(super) direct: Option<Target>,
    pub(super) passthrough: Option<SluiceTarget>,
    pub(super) cached: Option<SluiceTarget>,
    pub(super) cached_by_table: Option<SluiceTarget>,
    pub(super) dedicated: Option<SluiceTarget>,
    /// A TCP proxy (the haproxy scenario); its pid, when given, is read like a Sluice's.
    pub(super) haproxy: Option<SluiceTarget>,
    pub(super) traced: Option<SluiceTarget>,
    pub(super) traced_all: Option<SluiceTarget>,
}

impl Targets {
    pub(super) fn from_args(args: &CacheArgs) -> anyhow::Result<Targets> {
        let target = |host: &Option<String>, port: Option<u16>| {
            (host.is_some() || port.is_some()).then(|| Target {
                host: host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                port: port.unwrap_or(3306),
            })
        };
        let sluice = |host: &Option<String>, port: Option<u16>, pid: Option<u32>| {
            target(host, port).map(|target| SluiceTarget { target, pid })
        };
        let targets = Targets {
            direct: target(&args.server.mysql_host, args.server.mysql_port),
            passthrough: sluice(&args.sluice_host, args.sluice_port, args.sluice_pid),
            cached: sluice(&args.cached_host, args.cached_port, args.cached_pid),
            cached_by_table: sluice(
                &args.cached_by_table_host,
                args.cached_by_table_port,
                args.cached_by_table_pid,
            ),
            dedicated: sluice(
                &args.dedicated_host,
                args.dedicated_port,
                args.dedicated_pid,
            ),
            haproxy: sluice(&args.haproxy_host, args.haproxy_port, args.haproxy_pid),
            traced: sluice(&args.traced_host, args.traced_port, args.traced_pid),
            traced_all: sluice(
                &args.traced_all_host,
                args.traced_all_port,
                args.traced_all_pid,
            ),
        };
        if args.sluice_pid.is_some() && targets.passthrough.is_none() {
            bail!("--sluice-pid is for an existing Sluice (--sluice-host/--sluice-port)");
        }
        if args.cached_pid.is_some() && targets.cached.is_none() {
            bail!("--cached-pid is for an existing caching Sluice (--cached-host/--cached-port)");
        }
        if args.cached_by_table_pid.is_some() && targets.cached_by_table.is_none() {
            bail!(
                "--cached-by-table-pid is for an existing Sluice caching by table \
                 (--cached-by-table-host/--cached-by-table-port)"
            );
        }
        if args.dedicated_pid.is_some() && targets.dedicated.is_none() {
            bail!(
                "--dedicated-pid is for an existing Sluice without multiplexing \
                 (--dedicated-host/--dedicated-port)"
            );
        }
        if args.haproxy_pid.is_some() && targets.haproxy.is_none() {
            bail!("--haproxy-pid is for an existing proxy (--haproxy-host/--haproxy-port)");
        }
        if args.traced_pid.is_some() && targets.traced.is_none() {
            bail!("--traced-pid is for an existing traced Sluice (--traced-host/--traced-port)");
        }
        if args.traced_all_pid.is_some() && targets.traced_all.is_none() {
            bail!(
                "--traced-all-pid is for an existing Sluice tracing every statement \
                 (--traced-all-host/--traced-all-port)"
            );
        }
        Ok(targets)
    }

    pub(super) fn external(&self) -> bool {
        self.given().iter().any(|(_, given, _)| *given)
    }

    /// Each scenario, whether its server is named, and the flags that name it.
    fn given(&self) -> [(Scenario, bool, &'static str); 8] {
        [
            (
                Scenario::Direct,
                self.direct.is_some(),
                "--mysql-host/--mysql-port",
            ),
            (
                Scenario::Passthrough,
                self.passthrough.is_some(),
                "--sluice-host/--sluice-port",
            ),
            (
                Scenario::Dedicated,
                self.dedicated.is_some(),
                "--dedicated-host/--dedicated-port",
            ),
            (
                Scenario::Cached,
                self.cached.is_some(),
                "--cached-host/--cached-port",
            ),
            (
                Scenario::CachedByTable,
                self.cached_by_table.is_some(),
                "--cached-by-table-host/--cached-by-table-port",
            ),
            (
                Scenario::Haproxy,
                self.haproxy.is_some(),
                "--haproxy-host/--haproxy-port",
            ),
            (
                Scenario::Traced,
                self.traced.is_some(),
                "--traced-host/--traced-port",
            ),
            (
                Scenario::TracedAll,
                self.traced_all.is_some(),
                "--traced-all-host/--traced-all-port",
            ),
        ]
    }

    /// The scenarios `asked` for, else those whose servers are named, else the default
    /// three. With existing servers, each scenario needs its own named.
    pub(super) fn scenarios(&self, asked: Option<&[Scenario]>) -> anyhow::Result<Vec<Scenario>> {
        let given = self.given();
        let scenarios = match asked {
            Some(list) => dedup(list),
            None if self.external() => given
                .iter()
                .filter_map(|(s, given, _)| given.then_some(*s))
                .collect(),
            None => vec![Scenario::Direct, Scenario::Passthrough, Scenario::Cached],
        };
        if scenarios.is_empty() {
            bail!("--scenarios needs at least one scenario");
        }
        if self.external() {
            for (scenario, given, flags) in given {
                if scenarios.contains(&scenario) && !given {
                    bail!("the {scenario} scenario needs {flags} when targeting existing servers");
                }
            }
        }
        Ok(scenarios)
    }
}
