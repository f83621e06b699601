//! What the monitor's account may do on a server: the global privileges monitoring,
//! failover and switchover need, read from `SHOW GRANTS` each time the monitor
//! connects, so that a missing one is named at start and in the admin API rather
//! than discovered half-way through a promotion.

/// A privilege Sluice needs of its monitor account, and what for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needed {
    pub privilege: &'static str,
    /// The statements that need it, as the admin API and the log say.
    pub used_for: &'static str,
    /// Other global grants that give what the statements need on MariaDB 10.11
    /// (checked on a real server: `SUPER` runs `SHOW SLAVE STATUS` and `STOP`/`START
    /// SLAVE`, but no longer `SET GLOBAL read_only`, and never `RESET SLAVE ALL`).
    also: &'static [&'static str],
}

/// Everything the monitor account needs, in the order the docs list it.
pub const NEEDED: &[Needed] = &[
    Needed {
        privilege: "SLAVE MONITOR",
        used_for: "SHOW SLAVE STATUS (monitor, failover)",
        also: &["SUPER"],
    },
    Needed {
        privilege: "READ_ONLY ADMIN",
        used_for: "SET GLOBAL read_only (failover, switchover)",
        also: &[],
    },
    Needed {
        privilege: "REPLICATION SLAVE ADMIN",
        used_for: "STOP SLAVE, CHANGE MASTER TO, START SLAVE (failover, switchover)",
        also: &["SUPER"],
    },
    Needed {
        privilege: "RELOAD",
        used_for: "RESET SLAVE ALL on the promoted server (failover, switchover)",
        also: &[],
    },
];

/// The needed privileges `SHOW GRANTS` (its lines) does not give, in [`NEEDED`] order.
/// Only global grants (`ON *.*`) count: the statements are all server-wide. Lines of
/// roles the account has enabled count too, as the server shows them.
pub fn missing(show_grants: &[String]) -> Vec<&'static Needed> {
    let held: Vec<String> = show_grants
        .iter()
        .filter_map(|line| global_privileges(line))
        .flatten()
        .collect();
    let has = |p: &str| held.iter().any(|h| h == p || h == "ALL PRIVILEGES");
    NEEDED
        .iter()
        .filter(|n| !has(n.privilege) && !n.also.iter().any(|a| has(a)))
        .collect()
}

/// The privileges of a `GRANT ... ON *.* TO ...` line, upper case; `None` for other
/// lines (database, table or role grants).
fn global_privileges(line: &str) -> Option<Vec<String>> {
    let upper = line.to_ascii_uppercase();
    let rest = upper.strip_prefix("GRANT ")?;
    let (privileges, _) = rest.split_once(" ON *.* TO ")?;
    Some(
        privileges
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(lines: &[&str]) -> Vec<&'static str> {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        missing(&lines).iter().map(|n| n.privilege).collect()
    }

    #[test]
    fn the_documented_grants_are_enough() {
        assert!(names(&[
            "GRANT RELOAD, READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR ON *.* \
             TO `mon`@`%` IDENTIFIED BY PASSWORD '*E8BE'"
        ])
        .is_empty());
        assert!(
            names(&["GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"])
                .is_empty()
        );
    }

    #[test]
    fn what_is_missing_is_named_and_other_scopes_do_not_count() {
        assert_eq!(
            names(&[
                "GRANT READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR ON *.* TO `m`@`%`",
                "GRANT ALL PRIVILEGES ON `app`.* TO `m`@`%`",
                "GRANT `ops` TO `m`@`%`",
            ]),
            ["RELOAD"]
        );
        assert_eq!(
            names(&["GRANT SUPER ON *.* TO `m`@`%`"]),
            ["READ_ONLY ADMIN", "RELOAD"]
        );
        assert_eq!(
            names(&["GRANT USAGE ON *.* TO `m`@`%`"]),
            [
                "SLAVE MONITOR",
                "READ_ONLY ADMIN",
                "REPLICATION SLAVE ADMIN",
                "RELOAD"
            ]
        );
    }

    #[test]
    fn an_enabled_roles_grants_count() {
        assert!(names(&[
            "GRANT USAGE ON *.* TO `m`@`%`",
            "GRANT `ops` TO `m`@`%`",
            "GRANT RELOAD, READ_ONLY ADMIN, REPLICATION SLAVE ADMIN, SLAVE MONITOR ON *.* TO `ops`",
        ])
        .is_empty());
    }
}
