//! Command bytes (`COM_*`) that open every client request, and what a request's first
//! bytes say about it ([`Request`]), decoded once when it arrives.

use crate::tracker::ResponseKind;

/// A client command, by its first payload byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Command {
    Sleep = 0x00,
    Quit = 0x01,
    InitDb = 0x02,
    Query = 0x03,
    FieldList = 0x04,
    CreateDb = 0x05,
    DropDb = 0x06,
    Refresh = 0x07,
    Shutdown = 0x08,
    Statistics = 0x09,
    ProcessInfo = 0x0a,
    Connect = 0x0b,
    ProcessKill = 0x0c,
    Debug = 0x0d,
    Ping = 0x0e,
    Time = 0x0f,
    DelayedInsert = 0x10,
    ChangeUser = 0x11,
    BinlogDump = 0x12,
    TableDump = 0x13,
    ConnectOut = 0x14,
    RegisterSlave = 0x15,
    StmtPrepare = 0x16,
    StmtExecute = 0x17,
    StmtSendLongData = 0x18,
    StmtClose = 0x19,
    StmtReset = 0x1a,
    SetOption = 0x1b,
    StmtFetch = 0x1c,
    Daemon = 0x1d,
    BinlogDumpGtid = 0x1e,
    ResetConnection = 0x1f,
    StmtBulkExecute = 0xfa,
}

impl Command {
    pub fn from_byte(b: u8) -> Option<Command> {
        use Command::*;
        Some(match b {
            0x00 => Sleep,
            0x01 => Quit,
            0x02 => InitDb,
            0x03 => Query,
            0x04 => FieldList,
            0x05 => CreateDb,
            0x06 => DropDb,
            0x07 => Refresh,
            0x08 => Shutdown,
            0x09 => Statistics,
            0x0a => ProcessInfo,
            0x0b => Connect,
            0x0c => ProcessKill,
            0x0d => Debug,
            0x0e => Ping,
            0x0f => Time,
            0x10 => DelayedInsert,
            0x11 => ChangeUser,
            0x12 => BinlogDump,
            0x13 => TableDump,
            0x14 => ConnectOut,
            0x15 => RegisterSlave,
            0x16 => StmtPrepare,
            0x17 => StmtExecute,
            0x18 => StmtSendLongData,
            0x19 => StmtClose,
            0x1a => StmtReset,
            0x1b => SetOption,
            0x1c => StmtFetch,
            0x1d => Daemon,
            0x1e => BinlogDumpGtid,
            0x1f => ResetConnection,
            0xfa => StmtBulkExecute,
            _ => return None,
        })
    }

    /// MySQL's name for the command, for logs and error messages.
    pub fn name(self) -> &'static str {
        use Command::*;
        match self {
            Sleep => "COM_SLEEP",
            Quit => "COM_QUIT",
            InitDb => "COM_INIT_DB",
            Query => "COM_QUERY",
            FieldList => "COM_FIELD_LIST",
            CreateDb => "COM_CREATE_DB",
            DropDb => "COM_DROP_DB",
            Refresh => "COM_REFRESH",
            Shutdown => "COM_SHUTDOWN",
            Statistics => "COM_STATISTICS",
            ProcessInfo => "COM_PROCESS_INFO",
            Connect => "COM_CONNECT",
            ProcessKill => "COM_PROCESS_KILL",
            Debug => "COM_DEBUG",
            Ping => "COM_PING",
            Time => "COM_TIME",
            DelayedInsert => "COM_DELAYED_INSERT",
            ChangeUser => "COM_CHANGE_USER",
            BinlogDump => "COM_BINLOG_DUMP",
            TableDump => "COM_TABLE_DUMP",
            ConnectOut => "COM_CONNECT_OUT",
            RegisterSlave => "COM_REGISTER_SLAVE",
            StmtPrepare => "COM_STMT_PREPARE",
            StmtExecute => "COM_STMT_EXECUTE",
            StmtSendLongData => "COM_STMT_SEND_LONG_DATA",
            StmtClose => "COM_STMT_CLOSE",
            StmtReset => "COM_STMT_RESET",
            SetOption => "COM_SET_OPTION",
            StmtFetch => "COM_STMT_FETCH",
            Daemon => "COM_DAEMON",
            BinlogDumpGtid => "COM_BINLOG_DUMP_GTID",
            ResetConnection => "COM_RESET_CONNECTION",
            StmtBulkExecute => "COM_STMT_BULK_EXECUTE",
        }
    }
}

impl Command {
    /// Whether the request names a prepared statement by its id (bytes 1..5).
    pub fn names_statement(self) -> bool {
        use Command::*;
        matches!(
            self,
            StmtExecute | StmtFetch | StmtReset | StmtSendLongData | StmtClose
        )
    }
}

/// A client request as its first payload bytes tell it: the command, how its response
/// is read, and, for a `COM_STMT_*` request, the statement id as the client numbered it
/// (a proxy may put another id in the packet on its way to a server; this one stays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    pub kind: ResponseKind,
    pub stmt_id: Option<u32>,
}

impl Request {
    /// The request whose payload starts with `head` (at least the first 6 bytes, for an
    /// execute's cursor flag). `None`: an empty payload or a command byte MySQL does
    /// not define. An id cut short is left for the server to refuse (`stmt_id` None).
    pub fn parse(head: &[u8]) -> Option<Request> {
        let command = Command::from_byte(*head.first()?)?;
        let stmt_id = match command.names_statement() {
            true => crate::statement::request_stmt_id(head),
            false => None,
        };
        Some(Request {
            command,
            kind: ResponseKind::of(command, head),
            stmt_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_from_its_first_bytes() {
        assert_eq!(Request::parse(&[]), None);
        assert_eq!(Request::parse(&[0x60]), None);
        let query = Request::parse(b"\x03SELECT 1").unwrap();
        assert_eq!(
            (query.command, query.kind),
            (Command::Query, ResponseKind::Query)
        );
        // Text bytes where a statement's id would be are not one.
        assert_eq!(query.stmt_id, None);
        let execute = Request::parse(&[0x17, 7, 0, 0, 0, 1, 1, 0, 0, 0]).unwrap();
        assert_eq!(execute.stmt_id, Some(7));
        assert_eq!(execute.kind, ResponseKind::Execute { cursor: true });
        let close = Request::parse(&[0x19, 0x2a, 1, 0, 0]).unwrap();
        assert_eq!(
            (close.stmt_id, close.kind),
            (Some(0x12a), ResponseKind::None)
        );
        // Cut short: the server answers it.
        assert_eq!(Request::parse(&[0x19, 1, 0]).unwrap().stmt_id, None);
    }
}
