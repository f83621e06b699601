//! Errors at the proxy's boundaries. Each knows which side failed, whether a retry is
//! safe (nothing reached the client yet), and the MySQL error the client receives.

use sluice_wire::response::ErrPacket;
use sluice_wire::ProtocolError;
use std::time::Duration;

/// MySQL error codes Sluice produces itself.
pub mod code {
    pub const ER_CON_COUNT_ERROR: u16 = 1040;
    pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
    pub const ER_UNKNOWN_COM_ERROR: u16 = 1047;
    pub const ER_HANDSHAKE_ERROR: u16 = 1043;
    pub const ER_NET_PACKETS_OUT_OF_ORDER: u16 = 1156;
    pub const ER_NET_PACKET_TOO_LARGE: u16 = 1153;
    pub const ER_NO_SUCH_THREAD: u16 = 1094;
    pub const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;
    pub const ER_TOO_MANY_USER_CONNECTIONS: u16 = 1203;
    pub const ER_SERVER_SHUTDOWN: u16 = 1053;
    pub const ER_SECURE_TRANSPORT_REQUIRED: u16 = 3159;
    /// Client libraries turn any 2000-2999 code a server sends into "malformed packet",
    /// so failures towards backends use server-range codes.
    pub const ER_CONNECT_TO_FOREIGN_DATA_SOURCE: u16 = 1429;
    pub const ER_NET_READ_ERROR: u16 = 1158;
    pub const ER_MALFORMED_PACKET: u16 = 1835;
    /// Same code ProxySQL uses for "no backend connection within the wait limit".
    pub const POOL_TIMEOUT: u16 = 9001;
    /// No server can take the statement (no writer during a failover, no reader).
    pub const NO_SERVER: u16 = 9002;
    pub const ER_NOT_ALLOWED_COMMAND: u16 = 1148;
    pub const ER_QUERY_INTERRUPTED: u16 = 1317;
    pub const ER_LOCK_DEADLOCK: u16 = 1213;
    pub const ER_KILL_DENIED_ERROR: u16 = 1095;
    pub const ER_CONNECTION_KILLED: u16 = 1927;
    pub const ER_NO_SUCH_QUERY: u16 = 1957;
    pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
    pub const ER_ERROR_DURING_COMMIT: u16 = 1180;
    pub const ER_UNSUPPORTED_PS: u16 = 1295;
    pub const ER_WRONG_ARGUMENTS: u16 = 1210;
    pub const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;
}

/// Which side of the proxy a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Backend,
    Internal,
}

/// A failure talking to a backend server.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot connect to server '{server}' at {address}: {source}")]
    Connect {
        server: String,
        address: String,
        source: std::io::Error,
    },
    #[error("connecting to server '{server}' at {address} timed out after {after:?}")]
    ConnectTimeout {
        server: String,
        address: String,
        after: Duration,
    },
    #[error("server '{server}' refused the login: {err}")]
    Rejected { server: String, err: ErrPacket },
    #[error("server '{server}' broke the protocol: {source}")]
    Protocol {
        server: String,
        source: ProtocolError,
    },
    #[error("lost connection to server '{server}': {source}")]
    Io {
        server: String,
        source: std::io::Error,
    },
    #[error("TLS with server '{server}' failed: {reason}")]
    Tls { server: String, reason: String },
    #[error("no connection to server '{server}' became free within {waited:?} (max {max})")]
    PoolTimeout {
        server: String,
        waited: Duration,
        max: u32,
    },
    #[error("too many statements are queued for server '{server}' (max {max})")]
    QueueFull { server: String, max: u32 },
    #[error("server '{server}' does not support {what}")]
    Unsupported { server: String, what: String },
    #[error("no {role} server is available (waited {waited:?})")]
    NoServer {
        role: &'static str,
        waited: Duration,
    },
}

impl BackendError {
    /// Whether nothing of the client's request can have reached the server, so that the
    /// request may be sent elsewhere.
    pub fn retry_safe(&self) -> bool {
        matches!(
            self,
            BackendError::Connect { .. }
                | BackendError::ConnectTimeout { .. }
                | BackendError::PoolTimeout { .. }
                | BackendError::QueueFull { .. }
                | BackendError::NoServer { .. }
        )
    }

    /// The error packet the client sees.
    pub fn to_err_packet(&self) -> ErrPacket {
        match self {
            // The server's own refusal is passed through untouched.
            BackendError::Rejected { err, .. } => err.clone(),
            BackendError::Connect {
                server,
                address,
                source,
            } => ErrPacket::new(
                code::ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                "HY000",
                format!(
                    "Can't connect to server '{server}' on '{address}' ({})",
                    source
                        .raw_os_error()
                        .map_or_else(|| source.to_string(), |e| format!("{e} \"{source}\""))
                ),
            ),
            BackendError::ConnectTimeout {
                server, address, ..
            } => ErrPacket::new(
                code::ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                "HY000",
                format!("Can't connect to server '{server}' on '{address}' (timed out)"),
            ),
            BackendError::Io { server, .. } => lost_connection(server),
            BackendError::Protocol { server, .. } => ErrPacket::new(
                code::ER_MALFORMED_PACKET,
                "HY000",
                format!("Malformed packet from server '{server}'"),
            ),
            BackendError::Tls { server, reason } => ErrPacket::new(
                code::ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                "HY000",
                format!("SSL connection error with server '{server}': {reason}"),
            ),
            e @ (BackendError::PoolTimeout { .. } | BackendError::QueueFull { .. }) => {
                ErrPacket::new(code::POOL_TIMEOUT, "HY000", format!("Sluice: {e}"))
            }
            e @ BackendError::NoServer { .. } => {
                ErrPacket::new(code::NO_SERVER, "HY000", format!("Sluice: {e}"))
            }
            e @ BackendError::Unsupported { .. } => ErrPacket::new(
                code::ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                "HY000",
                format!("Sluice: {e}"),
            ),
        }
    }
}

/// Why a client session ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("client connection: {0}")]
    ClientIo(#[from] std::io::Error),
    #[error("client protocol: {0}")]
    ClientProtocol(#[from] ProtocolError),
    #[error("client TLS: {0}")]
    ClientTls(String),
    #[error("client took longer than {0:?} to log in")]
    HandshakeTimeout(Duration),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl SessionError {
    pub fn side(&self) -> Side {
        match self {
            SessionError::Backend(_) => Side::Backend,
            _ => Side::Client,
        }
    }
}

/// Why something Sluice asked of a server, or a stage of a client's statement, did not
/// happen, told by what the failure costs: the statement alone, or what it ran over.
/// `E` is what ends then: the backend connection ([`BackendError`], for the commands
/// Sluice sends on one) or the session ([`SessionError`], the default, for the stages
/// of a statement). `?` carries a connection's failure into a stage's.
#[derive(Debug, thiserror::Error)]
pub enum Failed<E = SessionError> {
    /// Answered with this error: the server's own answer to a command Sluice sent, or
    /// for a stage the error the client is answered with. Only the statement failed:
    /// the connection and the session go on.
    #[error("{0}")]
    Answered(ErrPacket),
    /// What the statement ran over failed: the backend connection, which can't be
    /// used again, or the session, which ends.
    #[error(transparent)]
    Broken(E),
}

impl<E> Failed<E> {
    /// The error to answer with, or what broke (to pass on with `?`): splits "answer
    /// and go on" from "end".
    pub fn answered(self) -> Result<ErrPacket, E> {
        match self {
            Failed::Answered(err) => Ok(err),
            Failed::Broken(e) => Err(e),
        }
    }

    pub fn is_broken(&self) -> bool {
        matches!(self, Failed::Broken(_))
    }

    /// The same failure, what broke told by `f` (in a layer above).
    pub fn map_broken<F>(self, f: impl FnOnce(E) -> F) -> Failed<F> {
        match self {
            Failed::Answered(err) => Failed::Answered(err),
            Failed::Broken(e) => Failed::Broken(f(e)),
        }
    }
}

impl Failed<BackendError> {
    /// Both cases are the server's side: it refused, or its connection failed.
    pub fn side(&self) -> Side {
        Side::Backend
    }

    /// What a client gets when its session goes on without the connection: the
    /// server's error, or what losing the connection means to it.
    pub fn to_err_packet(&self) -> ErrPacket {
        match self {
            Failed::Answered(err) => err.clone(),
            Failed::Broken(e) => e.to_err_packet(),
        }
    }
}

impl Failed<SessionError> {
    /// An error the client is answered with is the server's side: the server refused
    /// the statement, or Sluice did in its place (no server for it, a server's limit).
    pub fn side(&self) -> Side {
        match self {
            Failed::Answered(_) => Side::Backend,
            Failed::Broken(e) => e.side(),
        }
    }
}

impl<E> From<E> for Failed<E> {
    fn from(e: E) -> Self {
        Failed::Broken(e)
    }
}

/// A backend failure not handled by the stage ends the session, as with
/// [`SessionError`]'s own `From`.
impl From<BackendError> for Failed<SessionError> {
    fn from(e: BackendError) -> Self {
        Failed::Broken(e.into())
    }
}

/// A command a stage sent: the server's answer goes to the client, a failed
/// connection ends the session (unless the stage handles it first).
impl From<Failed<BackendError>> for Failed<SessionError> {
    fn from(f: Failed<BackendError>) -> Self {
        f.map_broken(SessionError::Backend)
    }
}

/// For callers to whom a server's error only means there is no value.
pub trait RefusedAsNone<T, E> {
    /// `None` when the server answered with an error; what broke is passed on.
    fn refused_as_none(self) -> Result<Option<T>, E>;
}

impl<T, E> RefusedAsNone<T, E> for Result<T, Failed<E>> {
    fn refused_as_none(self) -> Result<Option<T>, E> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Failed::Answered(_)) => Ok(None),
            Err(Failed::Broken(e)) => Err(e),
        }
    }
}

/// What a client gets when the server its statement ran on was lost before answering:
/// the server's 1158, naming it.
pub fn lost_connection(server: &str) -> ErrPacket {
    ErrPacket::new(
        code::ER_NET_READ_ERROR,
        "08S01",
        format!("Lost connection to server '{server}' during query"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown_database() -> ErrPacket {
        ErrPacket::new(1049, "42000", "Unknown database 'x'")
    }

    fn lost() -> BackendError {
        BackendError::Io {
            server: "db1".into(),
            source: std::io::ErrorKind::UnexpectedEof.into(),
        }
    }

    /// A stage that sends a command and passes on whatever it did not handle.
    fn stage(sent: Result<u8, Failed<BackendError>>) -> Result<u8, Failed> {
        Ok(sent? + 1)
    }

    #[test]
    fn a_server_error_is_answered_and_the_session_goes_on() {
        let sent: Failed<BackendError> = Failed::Answered(unknown_database());
        assert_eq!(sent.side(), Side::Backend);
        assert_eq!(sent.to_err_packet(), unknown_database());
        let failed = stage(Err(sent)).unwrap_err();
        assert!(!failed.is_broken());
        assert_eq!(failed.side(), Side::Backend);
        assert_eq!(failed.answered().unwrap(), unknown_database());
        assert_eq!(stage(Ok(1)).unwrap(), 2);
    }

    #[test]
    fn a_lost_connection_ends_the_session_unless_the_stage_answers_it() {
        let sent: Failed<BackendError> = lost().into();
        assert!(sent.is_broken());
        assert_eq!(sent.side(), Side::Backend);
        // A stage that goes on without the connection answers with the server's 1158.
        assert_eq!(sent.to_err_packet().code, code::ER_NET_READ_ERROR);
        let failed = stage(Err(sent)).unwrap_err();
        assert!(failed.is_broken());
        assert_eq!(failed.side(), Side::Backend);
        assert!(matches!(
            failed.answered(),
            Err(SessionError::Backend(BackendError::Io { .. }))
        ));
    }

    #[test]
    fn a_refusal_can_mean_no_value_but_a_lost_connection_cannot() {
        let answered: Result<u8, Failed<BackendError>> = Ok(7);
        assert_eq!(answered.refused_as_none().unwrap(), Some(7));
        let refused: Result<u8, Failed<BackendError>> = Err(Failed::Answered(unknown_database()));
        assert_eq!(refused.refused_as_none().unwrap(), None);
        let broken: Result<u8, Failed<BackendError>> = Err(lost().into());
        assert!(matches!(
            broken.refused_as_none(),
            Err(BackendError::Io { .. })
        ));
    }

    #[test]
    fn a_client_failure_ends_the_session_on_the_clients_side() {
        let gone = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let failed: Failed = SessionError::from(gone).into();
        assert_eq!(failed.side(), Side::Client);
        assert!(matches!(failed.answered(), Err(SessionError::ClientIo(_))));
        let failed: Failed = SessionError::HandshakeTimeout(Duration::from_secs(1)).into();
        assert_eq!(failed.side(), Side::Client);
    }
}
