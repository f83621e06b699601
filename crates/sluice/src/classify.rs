//! What a client command is and what the proxy does with it: forward it (and how its
//! response ends), handle it in Sluice, or refuse it with a MySQL error.

pub mod effects;
pub mod sql;

use crate::error::code;
use sluice_wire::command::Command;
use sluice_wire::response::ErrPacket;
use sluice_wire::tracker::ResponseKind;

#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to the backend; the response has this shape.
    Forward(ResponseKind),
    /// Close the session (COM_QUIT).
    Quit,
    /// Re-authenticate as another user (COM_CHANGE_USER).
    ChangeUser,
    /// A `KILL [QUERY|CONNECTION] id` naming a Sluice connection id.
    Kill { id: u32, query_only: bool },
    /// Answer with this error and keep the session.
    Refuse(ErrPacket),
}

/// Classifies a command from the first bytes of its payload.
pub fn classify(head: &[u8]) -> Action {
    let Some(&byte) = head.first() else {
        return Action::Refuse(unknown_command("an empty packet"));
    };
    let Some(command) = Command::from_byte(byte) else {
        return Action::Refuse(unknown_command(&format!("command byte {byte:#04x}")));
    };
    use Command::*;
    match command {
        Quit => Action::Quit,
        ChangeUser => Action::ChangeUser,
        Query => match parse_kill(&head[1..]) {
            Some((id, query_only)) => Action::Kill { id, query_only },
            None => Action::Forward(ResponseKind::Query),
        },
        InitDb | FieldList | Statistics | Ping | SetOption | ResetConnection | StmtPrepare
        | StmtExecute | StmtFetch | StmtClose | StmtReset | StmtSendLongData | Refresh | Debug => {
            Action::Forward(ResponseKind::of(command, head))
        }
        // Thread ids are the backend's, not ours: answered via KILL interception instead.
        ProcessKill => Action::Refuse(unknown_command(command.name())),
        // Replication, long-removed commands, shutdown of the server behind the proxy, and
        // MariaDB's bulk execute (not advertised) are not for a proxied session.
        Sleep | CreateDb | DropDb | Shutdown | ProcessInfo | Connect | Time | DelayedInsert
        | BinlogDump | TableDump | ConnectOut | RegisterSlave | Daemon | BinlogDumpGtid
        | StmtBulkExecute => Action::Refuse(unknown_command(command.name())),
    }
}

fn unknown_command(what: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_UNKNOWN_COM_ERROR,
        "08S01",
        format!("Unknown command ({what} is not supported through Sluice)"),
    )
}

/// Recognises `KILL [CONNECTION|QUERY] <id>` (case-insensitive, optional trailing `;`).
/// Connection ids clients see are Sluice's, so these must be translated, never forwarded.
fn parse_kill(sql: &[u8]) -> Option<(u32, bool)> {
    // Cheap rejection first: this runs for every query.
    let first = sql.iter().find(|b| !b.is_ascii_whitespace())?;
    if sql.len() > 64 || !first.eq_ignore_ascii_case(&b'k') {
        return None;
    }
    let text = std::str::from_utf8(sql)
        .ok()?
        .trim()
        .trim_end_matches(';')
        .trim_end();
    let mut words = text.split_ascii_whitespace();
    if !words.next()?.eq_ignore_ascii_case("kill") {
        return None;
    }
    let mut word = words.next()?;
    let mut query_only = false;
    if word.eq_ignore_ascii_case("query") {
        query_only = true;
        word = words.next()?;
    } else if word.eq_ignore_ascii_case("connection") {
        word = words.next()?;
    }
    let id = word.parse().ok()?;
    words.next().is_none().then_some((id, query_only))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_map_to_actions() {
        assert_eq!(
            classify(&[0x03, b'S']),
            Action::Forward(ResponseKind::Query)
        );
        assert_eq!(classify(&[0x01]), Action::Quit);
        assert_eq!(classify(&[0x11]), Action::ChangeUser);
        assert_eq!(
            classify(&[0x19, 1, 0, 0, 0]),
            Action::Forward(ResponseKind::None)
        );
        assert_eq!(
            classify(&[0x17, 1, 0, 0, 0, 1, 1, 0, 0, 0]),
            Action::Forward(ResponseKind::Execute { cursor: true })
        );
        for refused in [&[0x12u8][..], &[0x1d], &[0x99], &[]] {
            match classify(refused) {
                Action::Refuse(e) => assert_eq!((e.code, e.state_str()), (1047, "08S01")),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn kill_statements_are_recognised() {
        assert_eq!(parse_kill(b"KILL 12"), Some((12, false)));
        assert_eq!(parse_kill(b"  kill query 7 ;"), Some((7, true)));
        assert_eq!(parse_kill(b"Kill Connection 3"), Some((3, false)));
        assert_eq!(parse_kill(b"KILL USER app"), None);
        assert_eq!(parse_kill(b"KILL 12 13"), None);
        assert_eq!(parse_kill(b"SELECT 'KILL 1'"), None);
    }
}
