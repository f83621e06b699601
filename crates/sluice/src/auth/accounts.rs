//! Accounts that live on the servers: read from `mysql.global_priv` (MariaDB) or
//! `mysql.user` (MySQL) with an account of Sluice's, kept in memory, read again
//! periodically and, rate-limited, when a login names a user Sluice does not know.

use super::{host, BackendCredentials, User};
use crate::backend::{BackendConn, ConnParams, Server};
use crate::error::Failed;
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use crate::stream::Peer;
use arc_swap::ArcSwap;
use serde::Deserialize;
use sluice_wire::response::ErrPacket;
use sluice_wire::CapabilityFlags;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `[accounts]`: where logins are checked when `[[users]]` does not list the user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountsConfig {
    /// Learn the servers' accounts. Default: on when no `[[users]]` are given.
    pub from_servers: Option<bool>,
    /// Account that reads them (needs `SELECT ON mysql.global_priv`, or on
    /// `mysql.user` for MySQL). Default: `[monitor]`'s account.
    pub user: Option<String>,
    pub password: Option<Secret>,
    /// How often the accounts are read again. Default "5s".
    #[serde(default = "default_refresh", with = "humantime_serde")]
    pub refresh: Duration,
    /// Least time between two reads that logins trigger (an unknown user, a password
    /// that no longer matches). Default "1s".
    #[serde(default = "default_min_reload", with = "humantime_serde")]
    pub min_reload_interval: Duration,
    /// How long one read may take. Default "5s".
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

fn default_refresh() -> Duration {
    Duration::from_secs(5)
}

fn default_min_reload() -> Duration {
    Duration::from_secs(1)
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

impl Default for AccountsConfig {
    fn default() -> Self {
        AccountsConfig {
            from_servers: None,
            user: None,
            password: None,
            refresh: default_refresh(),
            min_reload_interval: default_min_reload(),
            timeout: default_timeout(),
        }
    }
}

impl AccountsConfig {
    pub fn enabled(&self, have_users: bool) -> bool {
        self.from_servers.unwrap_or(!have_users)
    }

    /// Problems with this section, given the rest of the configuration.
    pub fn validate(&self, have_users: bool, monitor_account: bool) -> Vec<String> {
        let mut p = Vec::new();
        if self.user.is_some() != self.password.is_some() {
            p.push("accounts.user and accounts.password go together".into());
        }
        if self.enabled(have_users) && self.user.is_none() && !monitor_account {
            p.push(
                "no [[users]] and no account to read the servers' accounts with: set \
                 [accounts] user and password (or [monitor]'s)"
                    .into(),
            );
        }
        if self.refresh.is_zero() {
            p.push("accounts.refresh must be more than 0".into());
        }
        p
    }
}

/// What the loader runs with; swapped whole on reload.
pub struct Settings {
    pub enabled: bool,
    /// The account that reads the accounts.
    pub creds: Option<Arc<BackendCredentials>>,
    pub refresh: Duration,
    pub min_reload_interval: Duration,
    pub timeout: Duration,
}

impl Settings {
    /// `monitor_account`: the `[monitor]` account, used when `[accounts]` names none;
    /// `have_users`: whether `[[users]]` lists any (the default for `enabled`).
    pub fn from_config(
        c: &AccountsConfig,
        monitor_account: (Option<&String>, Option<&Secret>),
        have_users: bool,
    ) -> Self {
        let creds = match (&c.user, &c.password, monitor_account) {
            (Some(u), Some(p), _) | (_, _, (Some(u), Some(p))) => Some((u.clone(), p.clone())),
            _ => None,
        };
        Settings {
            enabled: c.enabled(have_users),
            creds: creds.map(|(u, p)| Arc::new(BackendCredentials::new(u, p))),
            refresh: c.refresh,
            min_reload_interval: c.min_reload_interval,
            timeout: c.timeout,
        }
    }
}

/// The accounts of one read, each name's sorted the way the server tries them.
#[derive(Default)]
pub struct Directory {
    by_name: HashMap<String, Vec<Arc<User>>>,
}

impl Directory {
    /// Builds the directory from (user, host, plugin, stored, locked, role) rows and
    /// says how many accounts were left out (roles, anonymous, locked, plugins Sluice
    /// cannot verify).
    pub fn from_rows(rows: &[Vec<Option<Vec<u8>>>]) -> (Directory, usize) {
        let text = |v: Option<&Option<Vec<u8>>>| {
            v.and_then(|v| v.as_deref())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let yes = |s: &str| matches!(s, "true" | "1" | "Y" | "y");
        let mut by_name: HashMap<String, Vec<Arc<User>>> = HashMap::new();
        let mut skipped = 0;
        for row in rows {
            let (name, host) = (text(row.first()), text(row.get(1)));
            let (plugin, stored) = (text(row.get(2)), text(row.get(3)));
            if name.is_empty() || yes(&text(row.get(4))) || yes(&text(row.get(5))) {
                skipped += 1;
                continue;
            }
            match User::from_server(&name, &host, &plugin, &stored) {
                Some(u) => by_name.entry(name).or_default().push(Arc::new(u)),
                None => skipped += 1,
            }
        }
        for accounts in by_name.values_mut() {
            // Stable: equally specific hosts keep the table's order, as in the server.
            accounts.sort_by_key(|u| std::cmp::Reverse(host::specificity(&u.host)));
        }
        (Directory { by_name }, skipped)
    }

    /// The account `name` logs in as from `client`: the most specific host that matches.
    pub fn find(&self, name: &str, client: &Peer) -> Option<Arc<User>> {
        self.by_name
            .get(name)?
            .iter()
            .find(|u| host::admits(&u.host, client))
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.by_name.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// Why a read of the accounts failed.
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    #[error("no account configured to read the servers' accounts with")]
    NoAccount,
    #[error("no server to read the accounts from")]
    NoServer,
    #[error(transparent)]
    Backend(#[from] crate::error::BackendError),
    #[error("server '{server}' refused to list the accounts: {message} (error {code})")]
    Refused {
        server: String,
        code: u16,
        message: String,
    },
    #[error("server '{server}' did not list the accounts within {timeout:?}")]
    Timeout { server: String, timeout: Duration },
}

/// MariaDB 10.4+: the accounts' JSON; `plugin` is absent for pre-10.4 native accounts.
const GLOBAL_PRIV: &str = "SELECT User, Host, JSON_VALUE(Priv, '$.plugin'), \
     JSON_VALUE(Priv, '$.authentication_string'), JSON_VALUE(Priv, '$.account_locked'), \
     JSON_VALUE(Priv, '$.is_role') FROM mysql.global_priv";
/// MariaDB before 10.4: native hashes sit in `Password` when no plugin is named.
const MARIADB_USER: &str = "SELECT User, Host, plugin, \
     IF(plugin IN ('', 'mysql_native_password') AND authentication_string = '', \
        Password, authentication_string), 'N', is_role FROM mysql.user";
/// MySQL: no `Password` column, no roles in `mysql.user`.
const MYSQL_USER: &str =
    "SELECT User, Host, plugin, authentication_string, account_locked, 'N' FROM mysql.user";
const ER_NO_SUCH_TABLE: u16 = 1146;
const ER_BAD_FIELD_ERROR: u16 = 1054;

/// The connection accounts are read on, and the account it logged in as.
struct Reader {
    creds: Arc<BackendCredentials>,
    conn: BackendConn,
}

/// The servers' accounts as last read, and the loader's state.
pub struct ServerAccounts {
    settings: ArcSwap<Settings>,
    directory: ArcSwap<Directory>,
    /// When the latest read started, whatever started it.
    last_started: parking_lot::Mutex<Option<Instant>>,
    /// When the latest read a login triggered started: what rate-limits them.
    last_login_read: parking_lot::Mutex<Option<Instant>>,
    /// One read at a time (logins that need one wait for the running one), with the
    /// connection reads reuse: one login on the server per Sluice, not one per read.
    loading: tokio::sync::Mutex<Option<Reader>>,
    /// Account names a read found gone since the one before, not yet handed on.
    dropped: parking_lot::Mutex<Vec<String>>,
}

impl ServerAccounts {
    pub fn new(settings: Settings) -> ServerAccounts {
        ServerAccounts {
            settings: ArcSwap::from_pointee(settings),
            directory: ArcSwap::from_pointee(Directory::default()),
            last_started: parking_lot::Mutex::new(None),
            last_login_read: parking_lot::Mutex::new(None),
            loading: tokio::sync::Mutex::new(None),
            dropped: parking_lot::Mutex::new(Vec::new()),
        }
    }

    pub fn set_settings(&self, settings: Settings) {
        self.settings.store(Arc::new(settings));
    }

    pub fn enabled(&self) -> bool {
        self.settings.load().enabled
    }

    pub fn find(&self, name: &str, client: &Peer) -> Option<Arc<User>> {
        if !self.enabled() {
            return None;
        }
        self.directory.load().find(name, client)
    }

    /// A login found no account, or a proof that did not match: read the accounts
    /// again. Reads that logins trigger are at least `min_reload_interval` apart (so
    /// failed logins cannot hammer the server): a login waits for its turn rather than
    /// being refused on stale accounts. The caller looks the user up again afterwards.
    pub async fn reload_for_login(&self, server: Option<Arc<Server>>) {
        if !self.enabled() {
            return;
        }
        let asked = Instant::now();
        let mut reader = self.loading.lock().await;
        if self.last_started.lock().is_some_and(|t| t >= asked) {
            // A read that started after we asked already has what we wanted.
            return;
        }
        let Some(server) = server else { return };
        let previous = *self.last_login_read.lock();
        if let Some(previous) = previous {
            let wait = self
                .settings
                .load()
                .min_reload_interval
                .saturating_sub(previous.elapsed());
            tokio::time::sleep(wait).await;
        }
        *self.last_login_read.lock() = Some(Instant::now());
        if let Err(e) = self.load_locked(&mut reader, server).await {
            tracing::warn!(error = %e, "reading the servers' accounts failed");
        }
    }

    /// Reads the accounts from `server` and swaps them in.
    pub async fn reload(&self, server: Arc<Server>) -> Result<usize, AccountsError> {
        let mut reader = self.loading.lock().await;
        self.load_locked(&mut reader, server).await
    }

    async fn load_locked(
        &self,
        reader: &mut Option<Reader>,
        server: Arc<Server>,
    ) -> Result<usize, AccountsError> {
        *self.last_started.lock() = Some(Instant::now());
        let settings = self.settings.load_full();
        let creds = settings.creds.clone().ok_or(AccountsError::NoAccount)?;
        let name = server.name.clone();
        // A reload may have changed the account or the server: then a new connection.
        let mut open = reader
            .take()
            .filter(|r| {
                Arc::ptr_eq(&r.conn.server, &server) && r.creds == creds && r.conn.looks_healthy()
            })
            .map(|r| r.conn);
        let reused = open.is_some();
        let mut read =
            tokio::time::timeout(settings.timeout, fetch(&mut open, server.clone(), &creds)).await;
        if reused && matches!(read, Ok(Err(AccountsError::Backend(_)))) {
            // The server closed the idle connection (wait_timeout, a restart): once more.
            read = tokio::time::timeout(settings.timeout, fetch(&mut open, server, &creds)).await;
        }
        let rows = match read {
            Ok(Ok(rows)) => {
                *reader = open.map(|conn| Reader { creds, conn });
                rows
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(AccountsError::Timeout {
                    server: name,
                    timeout: settings.timeout,
                })
            }
        };
        let (directory, skipped) = Directory::from_rows(&rows);
        let n = directory.len();
        {
            let old = self.directory.load();
            let gone = old
                .by_name
                .keys()
                .filter(|u| !directory.by_name.contains_key(*u));
            self.dropped.lock().extend(gone.cloned());
        }
        tracing::debug!(accounts = n, skipped, "read the servers' accounts");
        self.directory.store(Arc::new(directory));
        Ok(n)
    }
}

/// Reads the accounts on `conn`, opened first if `None`; it is left `None` on failure.
async fn fetch(
    conn: &mut Option<BackendConn>,
    server: Arc<Server>,
    creds: &BackendCredentials,
) -> Result<Vec<Vec<Option<Vec<u8>>>>, AccountsError> {
    let params = ConnParams {
        wire_caps: CapabilityFlags::TRANSACTIONS,
        mariadb_caps: 0,
        charset: 45,
        track_state: false,
    };
    let name = server.name.clone();
    if conn.is_none() {
        *conn = Some(BackendConn::connect(server, creds, &params, None).await?);
    }
    let open = conn.as_mut().expect("just opened");
    let refused = |e: ErrPacket| AccountsError::Refused {
        server: name.clone(),
        code: e.code,
        message: e.message,
    };
    // Newest layout first; each older one is tried when the server lacks the table
    // or a column of the one before.
    let mut read = Err(AccountsError::NoServer);
    for (sql, missing) in [
        (GLOBAL_PRIV, ER_NO_SUCH_TABLE),
        (MARIADB_USER, ER_BAD_FIELD_ERROR),
        (MYSQL_USER, 0),
    ] {
        read = match open.query_rows(sql).await {
            Ok(rows) => Ok(rows),
            Err(Failed::Answered(e)) if e.code == missing => continue,
            Err(Failed::Answered(e)) => Err(refused(e)),
            Err(Failed::Broken(e)) => Err(e.into()),
        };
        break;
    }
    if read.is_err() {
        *conn = None;
    }
    read
}

/// The server the accounts are read from: the writer, else the first server.
pub fn source_server(router: &crate::router::Router) -> Option<Arc<Server>> {
    router
        .writer()
        .map(|w| w.pool.server.clone())
        .or_else(|| router.pools().next().map(|p| p.server.clone()))
}

/// Which server to read the accounts from (the writer when there is one).
pub type ServerSource = Box<dyn Fn() -> Option<Arc<Server>> + Send + Sync>;

/// Told the names of accounts dropped on the servers, after the read that found them gone.
pub type OnDropped = Box<dyn Fn(&[String]) + Send + Sync>;

/// Reads the accounts every `refresh` until shutdown. A failure keeps the accounts of
/// the last good read, and is logged when it starts and when it ends.
pub async fn run(
    accounts: Arc<ServerAccounts>,
    source: ServerSource,
    on_dropped: OnDropped,
    mut shutdown: Shutdown,
) {
    let mut failing = false;
    loop {
        // The first read happens before clients are accepted, at start.
        tokio::select! {
            _ = tokio::time::sleep(accounts.settings.load().refresh) => {}
            _ = shutdown.stopping() => return,
        }
        if accounts.enabled() {
            let result = match source() {
                Some(server) => accounts.reload(server).await,
                None => Err(AccountsError::NoServer),
            };
            let dropped = std::mem::take(&mut *accounts.dropped.lock());
            if !dropped.is_empty() {
                on_dropped(&dropped);
            }
            match result {
                Ok(n) if failing => {
                    failing = false;
                    tracing::info!(accounts = n, "reading the servers' accounts works again");
                }
                Ok(_) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "reading the servers' accounts failed; keeping the last ones read");
                }
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(user: &str, host: &str, plugin: Option<&str>, stored: &str) -> Vec<Option<Vec<u8>>> {
        vec![
            Some(user.into()),
            Some(host.into()),
            plugin.map(Into::into),
            Some(stored.into()),
            None,
            None,
        ]
    }

    #[test]
    fn the_most_specific_matching_host_wins() {
        let a = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";
        let rows = vec![
            row("u", "%", Some("mysql_native_password"), a),
            row("u", "10.%", Some("mysql_native_password"), a),
            row("u", "10.0.0.1", Some("mysql_native_password"), a),
            row("only", "10.%", Some("mysql_native_password"), a),
            row("", "%", None, ""),
            row("sock", "localhost", Some("unix_socket"), ""),
            vec![
                Some(b"r".to_vec()),
                Some(Vec::new()),
                None,
                None,
                None,
                Some(b"1".to_vec()),
            ],
        ];
        let (d, skipped) = Directory::from_rows(&rows);
        assert_eq!((d.len(), skipped), (4, 3));
        let host = |name: &str, ip: &str| {
            d.find(
                name,
                &Peer::Tcp(std::net::SocketAddr::new(ip.parse().unwrap(), 1)),
            )
            .map(|u| u.host.clone())
        };
        assert_eq!(host("u", "10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(host("u", "10.0.0.2").as_deref(), Some("10.%"));
        assert_eq!(host("u", "127.0.0.1").as_deref(), Some("%"));
        assert_eq!(host("only", "127.0.0.1"), None);
        assert_eq!(host("sock", "127.0.0.1"), None);
        assert_eq!(host("r", "127.0.0.1"), None);
    }

    #[test]
    fn without_users_an_account_to_read_with_is_required() {
        let parse = |t: &str| toml::from_str::<AccountsConfig>(t).unwrap();
        let none = parse("");
        assert!(none.enabled(false) && !none.enabled(true));
        assert_eq!(none.validate(false, false).len(), 1);
        assert!(none.validate(false, true).is_empty());
        assert!(none.validate(true, false).is_empty());
        let own = parse("user = \"a\"\npassword = \"p\"\nrefresh = \"2s\"");
        assert!(own.validate(false, false).is_empty());
        assert_eq!(own.refresh, Duration::from_secs(2));
        assert_eq!(parse("user = \"a\"").validate(true, true).len(), 1);
        assert!(toml::from_str::<AccountsConfig>("refresh_every = \"1s\"").is_err());
    }

    #[test]
    fn locked_accounts_are_left_out() {
        let mut locked = row("l", "%", None, "");
        locked[4] = Some(b"true".to_vec());
        let (d, skipped) = Directory::from_rows(&[locked]);
        assert!(d.is_empty());
        assert_eq!(skipped, 1);
    }
}
