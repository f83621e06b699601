//! Why a multiplexed session keeps its connection between statements: the state it
//! holds there that can't move to another connection ([`Pins`]), and the reason it is
//! shown and counted under ([`PinReason`]).

/// Declares [`PinReason`] once: each reason with what it means and its name in the
/// admin API and the metrics. The list of all reasons and the names follow from the
/// same declaration, so neither can miss one.
macro_rules! pin_reasons {
    ($($(#[doc = $doc:literal])+ $reason:ident => $name:literal,)+) => {
        /// Why a session keeps its backend connection between statements.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum PinReason {
            $($(#[doc = $doc])+ $reason,)+
        }

        impl PinReason {
            /// Every reason, in declaration order: `reason as usize` is its index.
            pub const ALL: &'static [PinReason] = &[$(PinReason::$reason,)+];
            pub const COUNT: usize = Self::ALL.len();

            /// Its name in the admin API and the metrics.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(PinReason::$reason => $name,)+
                }
            }
        }
    };
}

pin_reasons! {
    /// Inside a transaction (the server says so, or Sluice put off its `BEGIN`, or it
    /// spreads over several servers): it lives on that connection until it ends.
    Transaction => "transaction",
    /// A temporary table the session created: it exists on that connection only.
    TemporaryTable => "temporary_table",
    /// A named lock (`GET_LOCK`) held: released with the connection.
    NamedLock => "named_lock",
    /// `LOCK TABLES` in force.
    TableLock => "table_lock",
    /// `SQL_CALC_FOUND_ROWS` ran: the next `FOUND_ROWS()` reads that connection's count.
    FoundRows => "found_rows",
    /// An XA transaction begun and not yet ended.
    Xa => "xa",
    /// A backup lock (`BACKUP STAGE`, `BACKUP LOCK`) held.
    Backup => "backup_lock",
    /// A table opened with `HANDLER ... OPEN`.
    Handler => "handler",
    /// A statement prepared in SQL (`PREPARE name FROM ...`): it lives on the connection.
    SqlPrepared => "sql_prepared_statement",
    /// `SET TRANSACTION` without `SESSION`: it applies to the connection's next
    /// transaction only.
    NextTransaction => "next_transaction_characteristics",
    /// User variables whose values could not be read to carry them to another
    /// connection.
    UserVariables => "user_variables",
    /// An open cursor (`COM_STMT_EXECUTE` with a cursor): its rows are fetched there.
    Cursor => "cursor",
    /// Long data sent for a prepared statement's next execute.
    LongData => "long_data",
    /// The session changed what the server tracks for it (`session_track_*`).
    SessionTracking => "session_tracking_changed",
    /// `sql_log_bin` off: its writes must not reach the binlog, which only that
    /// connection knows.
    SqlLogBin => "sql_log_bin",
    /// A variable that fixes what the next statement does (`insert_id`, `timestamp`...).
    FixedVariable => "fixed_variable",
    /// Never a reason today: the write hold (`pool.write_hold`) keeps a connection
    /// without pinning the session. Listed so that the counts by reason keep their keys.
    WriteHold => "write_hold",
    /// The server said the session's state changed in a way neither session tracking
    /// nor the statement's text explains (a procedure created a temporary table...).
    UnknownState => "session_state_changed",
}

use std::collections::BTreeSet;

/// State that can't move to another connection, cleared by the statements that end it.
#[derive(Default, Debug)]
pub(super) struct Pins {
    pub(super) temp_tables: BTreeSet<String>,
    pub(super) named_locks: u32,
    pub(super) table_locks: bool,
    pub(super) found_rows: bool,
    pub(super) xa: bool,
    pub(super) backup: bool,
    pub(super) handlers: BTreeSet<String>,
    pub(super) sql_prepared: BTreeSet<String>,
    pub(super) next_transaction: bool,
    pub(super) user_vars: bool,
    pub(super) cursors: BTreeSet<u32>,
    pub(super) long_data: bool,
    pub(super) tracking: bool,
    pub(super) fixed_variable: bool,
    /// The server said the session's state changed in a way neither tracking nor the
    /// statement's text explains (a temporary table created by a procedure...).
    pub(super) unknown_state: bool,
}

impl Pins {
    pub(super) fn reason(&self) -> Option<PinReason> {
        Some(if !self.temp_tables.is_empty() {
            PinReason::TemporaryTable
        } else if self.named_locks > 0 {
            PinReason::NamedLock
        } else if self.table_locks {
            PinReason::TableLock
        } else if self.xa {
            PinReason::Xa
        } else if self.backup {
            PinReason::Backup
        } else if !self.handlers.is_empty() {
            PinReason::Handler
        } else if !self.sql_prepared.is_empty() {
            PinReason::SqlPrepared
        } else if self.user_vars {
            PinReason::UserVariables
        } else if !self.cursors.is_empty() {
            PinReason::Cursor
        } else if self.long_data {
            PinReason::LongData
        } else if self.tracking {
            PinReason::SessionTracking
        } else if self.fixed_variable {
            PinReason::FixedVariable
        } else if self.unknown_state {
            PinReason::UnknownState
        } else if self.found_rows {
            PinReason::FoundRows
        } else if self.next_transaction {
            PinReason::NextTransaction
        } else {
            return None;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PinReason;

    #[test]
    fn every_reason_is_listed_at_its_own_index_under_a_name_of_its_own() {
        for (i, r) in PinReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{r:?}");
        }
        let mut names: Vec<&str> = PinReason::ALL.iter().map(|r| r.as_str()).collect();
        // The names the admin API and the metrics have always used, in their order.
        assert_eq!(
            names,
            [
                "transaction",
                "temporary_table",
                "named_lock",
                "table_lock",
                "found_rows",
                "xa",
                "backup_lock",
                "handler",
                "sql_prepared_statement",
                "next_transaction_characteristics",
                "user_variables",
                "cursor",
                "long_data",
                "session_tracking_changed",
                "sql_log_bin",
                "fixed_variable",
                "write_hold",
                "session_state_changed",
            ]
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PinReason::COUNT);
    }
}
