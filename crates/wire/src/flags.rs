//! Capability and server-status flags, with MySQL's names.

/// `CLIENT_*` capability bits negotiated in the handshake.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CapabilityFlags(pub u32);

impl CapabilityFlags {
    pub const LONG_PASSWORD: u32 = 1;
    pub const FOUND_ROWS: u32 = 1 << 1;
    pub const LONG_FLAG: u32 = 1 << 2;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const NO_SCHEMA: u32 = 1 << 4;
    pub const COMPRESS: u32 = 1 << 5;
    pub const ODBC: u32 = 1 << 6;
    pub const LOCAL_FILES: u32 = 1 << 7;
    pub const IGNORE_SPACE: u32 = 1 << 8;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const INTERACTIVE: u32 = 1 << 10;
    pub const SSL: u32 = 1 << 11;
    pub const IGNORE_SIGPIPE: u32 = 1 << 12;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const RESERVED: u32 = 1 << 14;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    pub const CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 1 << 22;
    pub const SESSION_TRACK: u32 = 1 << 23;
    pub const DEPRECATE_EOF: u32 = 1 << 24;
    pub const OPTIONAL_RESULTSET_METADATA: u32 = 1 << 25;
    pub const ZSTD_COMPRESSION: u32 = 1 << 26;
    pub const QUERY_ATTRIBUTES: u32 = 1 << 27;
    pub const SSL_VERIFY_SERVER_CERT: u32 = 1 << 30;
    pub const REMEMBER_OPTIONS: u32 = 1 << 31;

    /// Bits that change how packets on an established connection are laid out. A backend
    /// connection can serve a client only if both agree on all of these.
    pub const WIRE_FORMAT: u32 = Self::FOUND_ROWS
        | Self::LONG_FLAG
        | Self::NO_SCHEMA
        | Self::ODBC
        | Self::LOCAL_FILES
        | Self::IGNORE_SPACE
        | Self::MULTI_STATEMENTS
        | Self::MULTI_RESULTS
        | Self::PS_MULTI_RESULTS
        | Self::SESSION_TRACK
        | Self::DEPRECATE_EOF
        | Self::INTERACTIVE
        | Self::TRANSACTIONS;

    pub fn contains(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// MariaDB's extended capabilities: a second 32-bit word exchanged in the handshake's
/// reserved bytes when neither side sets `CLIENT_LONG_PASSWORD` (MariaDB's
/// "not MySQL" marker).
pub mod mariadb {
    /// Progress reports as 0xff packets mid-statement: changes framing, never offered.
    pub const PROGRESS: u32 = 1 << 0;
    pub const COM_MULTI: u32 = 1 << 1;
    pub const STMT_BULK_OPERATIONS: u32 = 1 << 2;
    /// Extra type names ("json", "uuid"...) inside column definitions: content only.
    pub const EXTENDED_TYPE_INFO: u32 = 1 << 3;
    /// Metadata may be left out of execute responses: changes framing, never offered.
    pub const CACHE_METADATA: u32 = 1 << 4;
}

impl std::fmt::Debug for CapabilityFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapabilityFlags({:#010x})", self.0)
    }
}

/// `SERVER_*` status bits carried by OK and EOF packets.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct StatusFlags(pub u16);

impl StatusFlags {
    pub const IN_TRANS: u16 = 0x0001;
    pub const AUTOCOMMIT: u16 = 0x0002;
    pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
    pub const NO_GOOD_INDEX_USED: u16 = 0x0010;
    pub const NO_INDEX_USED: u16 = 0x0020;
    pub const CURSOR_EXISTS: u16 = 0x0040;
    pub const LAST_ROW_SENT: u16 = 0x0080;
    pub const DB_DROPPED: u16 = 0x0100;
    pub const NO_BACKSLASH_ESCAPES: u16 = 0x0200;
    pub const METADATA_CHANGED: u16 = 0x0400;
    pub const QUERY_WAS_SLOW: u16 = 0x0800;
    pub const PS_OUT_PARAMS: u16 = 0x1000;
    pub const IN_TRANS_READONLY: u16 = 0x2000;
    pub const SESSION_STATE_CHANGED: u16 = 0x4000;

    pub fn contains(self, bits: u16) -> bool {
        self.0 & bits == bits
    }
    pub fn in_transaction(self) -> bool {
        self.contains(Self::IN_TRANS)
    }
    pub fn more_results(self) -> bool {
        self.contains(Self::MORE_RESULTS_EXISTS)
    }
}
