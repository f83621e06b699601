//! Which of the scenarios asked for an embedded run can take part here: a Sluice with a
//! query cache (and `by_key`) for the caching ones, HAProxy for haproxy, a Sluice with
//! `[tracing]` and a receiver for the traced ones. What cannot run is reported as not
//! available, with the reason, and never attempted.

use super::measure::credentials;
use super::{CacheArgs, Plan, Scenario};
use crate::report::Unavailable;
use crate::topology::{self, Role};

/// Marks the caching scenarios the embedded Sluice cannot run as unavailable, with the
/// reason. Caching by table needs the cache first, then its `by_key` option.
pub(super) fn check_cache_support(plan: &mut Plan, args: &CacheArgs) -> anyhow::Result<()> {
    let wanted: Vec<Scenario> = plan
        .scenarios
        .iter()
        .copied()
        .filter(|s| s.caches())
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let bin = args.common.sluice_bin()?;
    let creds = credentials(args);
    let check = |role| topology::check_support(&bin, &plan.out_dir, &creds, role);
    let no_cache = check(Role::Cached).err();
    let mut unavailable = Vec::new();
    for scenario in wanted {
        let reason = match (&no_cache, scenario) {
            (Some(reason), _) => Some(reason.clone()),
            (None, Scenario::CachedByTable) => check(Role::CachedByTable).err(),
            (None, _) => None,
        };
        if let Some(reason) = reason {
            unavailable.push(Unavailable { scenario, reason });
        }
    }
    plan.unavailable.extend(unavailable);
    Ok(())
}

/// Marks the haproxy scenario unavailable when HAProxy is not here, with what to do.
pub(super) fn check_haproxy(plan: &mut Plan, args: &CacheArgs) {
    if !plan.scenarios.contains(&Scenario::Haproxy) {
        return;
    }
    match crate::topology::haproxy::find(&args.haproxy) {
        Ok(program) => plan.haproxy_program = Some(program),
        Err(e) => plan.unavailable.push(Unavailable {
            scenario: Scenario::Haproxy,
            reason: format!("{e:#}"),
        }),
    }
}

/// Marks the traced scenarios unavailable when this Sluice has no `[tracing]`, or when
/// there is no receiver: neither --otlp-endpoint nor a Jaeger program to start.
pub(super) fn check_tracing(plan: &mut Plan, args: &CacheArgs) -> anyhow::Result<()> {
    let wanted: Vec<Scenario> = plan
        .scenarios
        .iter()
        .copied()
        .filter(|s| s.traces())
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let bin = args.common.sluice_bin()?;
    let creds = credentials(args);
    let reason = match topology::check_support(&bin, &plan.out_dir, &creds, Role::Traced) {
        Err(reason) => Some(reason),
        Ok(()) if plan.otlp_endpoint.is_some() => None,
        Ok(()) => sluice_sandbox::jaeger::jaeger_path()
            .err()
            .map(|e| format!("no trace receiver: {e:#}, or give --otlp-endpoint")),
    };
    if let Some(reason) = reason {
        plan.unavailable
            .extend(wanted.into_iter().map(|scenario| Unavailable {
                scenario,
                reason: reason.clone(),
            }));
    }
    Ok(())
}
