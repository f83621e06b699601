//! What a client command is and what the proxy does with it: forward it (and how its
//! response ends), handle it in Sluice, or refuse it with a MySQL error.

pub mod effects;
pub mod facts;
pub mod identity;
pub mod keys;
pub mod kill;
pub mod sql;

use crate::error::code;
use sluice_wire::command::{Command, Request};
use sluice_wire::response::ErrPacket;

#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to the backend: the request, decoded once here for every later stage.
    Forward(Request),
    /// Close the session (COM_QUIT).
    Quit,
    /// Re-authenticate as another user (COM_CHANGE_USER).
    ChangeUser,
    /// COM_PROCESS_KILL naming a Sluice connection id. (KILL statements are found in
    /// the whole text, see [`kill::scan`].)
    Kill(kill::Kill),
    /// KILLs opening a multi-statement, each with the offset where its statement ends
    /// in the text: carried out by Sluice, then the rest of the text runs on the server.
    KillLeading(Vec<(kill::Kill, usize)>),
    /// Answer with this error and keep the session.
    Refuse(ErrPacket),
}

/// Classifies a command from the first bytes of its payload.
pub fn classify(head: &[u8]) -> Action {
    let Some(request) = Request::parse(head) else {
        return Action::Refuse(match head.first() {
            None => unknown_command("an empty packet"),
            Some(byte) => unknown_command(&format!("command byte {byte:#04x}")),
        });
    };
    use Command::*;
    match request.command {
        Quit => Action::Quit,
        ChangeUser => Action::ChangeUser,
        ProcessKill => match head.get(1..5) {
            Some(id) => Action::Kill(kill::Kill {
                query_only: false,
                target: kill::KillTarget::Session(u64::from(u32::from_le_bytes([
                    id[0], id[1], id[2], id[3],
                ]))),
            }),
            None => Action::Refuse(ErrPacket::new(
                code::ER_MALFORMED_PACKET,
                "HY000",
                "Malformed communication packet",
            )),
        },
        Query | InitDb | FieldList | Statistics | Ping | SetOption | ResetConnection
        | StmtPrepare | StmtExecute | StmtFetch | StmtClose | StmtReset | StmtSendLongData
        | Refresh | Debug => Action::Forward(request),
        // Replication, long-removed commands, shutdown of the server behind the proxy, and
        // MariaDB's bulk execute (not advertised) are not for a proxied session.
        Sleep | CreateDb | DropDb | Shutdown | ProcessInfo | Connect | Time | DelayedInsert
        | BinlogDump | TableDump | ConnectOut | RegisterSlave | Daemon | BinlogDumpGtid
        | StmtBulkExecute => Action::Refuse(unknown_command(request.command.name())),
    }
}

fn unknown_command(what: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_UNKNOWN_COM_ERROR,
        "08S01",
        format!("Unknown command ({what} is not supported through Sluice)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use sluice_wire::tracker::ResponseKind;

    fn forwarded(head: &[u8]) -> (ResponseKind, Option<u32>) {
        match classify(head) {
            Action::Forward(r) => (r.kind, r.stmt_id),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commands_map_to_actions() {
        assert_eq!(forwarded(&[0x03, b'S']), (ResponseKind::Query, None));
        assert_eq!(classify(&[0x01]), Action::Quit);
        assert_eq!(classify(&[0x11]), Action::ChangeUser);
        assert_eq!(
            forwarded(&[0x19, 1, 0, 0, 0]),
            (ResponseKind::None, Some(1))
        );
        assert_eq!(
            forwarded(&[0x17, 1, 0, 0, 0, 1, 1, 0, 0, 0]),
            (ResponseKind::Execute { cursor: true }, Some(1))
        );
        for refused in [&[0x12u8][..], &[0x1d], &[0x99], &[]] {
            match classify(refused) {
                Action::Refuse(e) => assert_eq!((e.code, e.state_str()), (1047, "08S01")),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn process_kill_names_a_session() {
        assert_eq!(
            classify(&[0x0c, 7, 0, 0, 0]),
            Action::Kill(kill::Kill {
                query_only: false,
                target: kill::KillTarget::Session(7)
            })
        );
    }
}
