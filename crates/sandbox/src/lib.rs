//! Private MariaDB servers on loopback for the integration tests, `make demo` and
//! `sluice bench`: not on the request path, but what every test of it runs against.
//!
//! [`MariaDb::start`] gives a real `mariadbd` with its own temporary data directory, a
//! free 127.0.0.1 port, the binary log on, optional TLS, and an admin account
//! ([`ADMIN_USER`]). Nothing here reads the machine's MariaDB configuration files
//! (`--no-defaults` everywhere), and no server outlives the process that started it:
//! each runs under a small shell watchdog that stops it and deletes its files as soon as
//! our end of a pipe closes, which the kernel does for us even when we are killed.
//!
//! A server can be killed or stopped and started again on the same files and port
//! ([`MariaDb::restart`]), and several make a topology (the `replication` module): a
//! GTID primary with replicas ([`ReplicaSet`]) or a Galera cluster ([`GaleraCluster`]).
//!
//! Beside the servers, the same watchdog runs [`Jaeger`], the OpenTelemetry trace
//! receiver the tracing tests read Sluice's spans back from (the `jaeger` module).

pub mod cpus;
pub mod jaeger;
pub mod link;
mod replication;

pub use jaeger::Jaeger;
pub use replication::{
    GaleraCluster, ReplicaSet, ReplicaSetOptions, REPL_PASSWORD, REPL_USER, SEMI_SYNC_TIMEOUT_MS,
};

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// Admin account created on every sandbox server, usable over TCP from anywhere.
pub const ADMIN_USER: &str = "sluice_admin";
/// Password of [`ADMIN_USER`].
pub const ADMIN_PASSWORD: &str = "sluice_admin";

/// How long a fresh server may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`MariaDb::stop`] waits for the watchdog, which itself escalates from
/// SIGTERM to SIGKILL after [`WATCHDOG_TERM_GRACE_TENTHS`].
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Tenths of a second the watchdog gives mariadbd between SIGTERM and SIGKILL.
const WATCHDOG_TERM_GRACE_TENTHS: u32 = 200;
/// Environment variable naming a directory searched first for the MariaDB programs.
pub const BIN_DIR_ENV: &str = "SLUICE_MARIADB_BIN_DIR";

/// The watchdog every server runs under. Arguments: the directory to delete after the
/// server exits (empty: none), the file for the server's own stdout and stderr, then the
/// server's command line. It prints the server's pid, then blocks reading stdin: a line
/// from us, or end of file when our process exits or dies, means "stop now". The line
/// `keep` leaves the directory in place, for a successor watchdog that restarts the
/// server on the same files.
const WATCHDOG: &str = r#"
remove=$1; out=$2; shift 2
"$@" </dev/null >"$out" 2>&1 &
server=$!
echo "$server"
exec >/dev/null
command=
read -r command || true
if [ "$command" = keep ]; then remove=; fi
kill -TERM "$server" 2>/dev/null
for ((i = 0; i < GRACE; i++)); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
if [ -n "$remove" ]; then rm -rf -- "$remove"; fi
"#;

/// What [`MariaDb::start`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MariaDbOptions {
    /// Serve TLS with a certificate from [`generate_tls`] (default false).
    pub tls: bool,
    /// `--max-connections` (default 2000).
    pub max_connections: u32,
    /// Appended last to mariadbd's command line, so they override our defaults. They are
    /// not given to the install step: options fixed at install time (page size, lower
    /// case table names) cannot be changed this way.
    pub extra_args: Vec<String>,
    /// `--server-id`, which replication needs unique per server (default 1).
    pub server_id: u32,
    /// `--log-slave-updates`: replicated transactions go to this server's binlog too,
    /// so that its replicas (or its own after a promotion) see them (default false).
    pub log_slave_updates: bool,
    /// `--gtid-strict-mode=ON` (default false).
    pub gtid_strict_mode: bool,
    /// Semi-synchronous replication in both roles, so that it still holds after a
    /// replica is promoted: master and slave sides enabled, a primary waits at most
    /// [`SEMI_SYNC_TIMEOUT_MS`] for an acknowledgement, and only while some semi-sync
    /// replica is connected (default false).
    pub semi_sync: bool,
    /// `--read-only=ON`, as replicas run (default false).
    pub read_only: bool,
}

impl Default for MariaDbOptions {
    fn default() -> Self {
        MariaDbOptions {
            tls: false,
            max_connections: 2000,
            extra_args: Vec::new(),
            server_id: 1,
            log_slave_updates: false,
            gtid_strict_mode: false,
            semi_sync: false,
            read_only: false,
        }
    }
}

impl MariaDbOptions {
    /// The mariadbd options for the replication settings above.
    fn replication_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.log_slave_updates {
            args.push("--log-slave-updates".to_owned());
        }
        if self.gtid_strict_mode {
            args.push("--gtid-strict-mode=ON".to_owned());
        }
        if self.semi_sync {
            args.extend([
                "--rpl-semi-sync-master-enabled=ON".to_owned(),
                "--rpl-semi-sync-slave-enabled=ON".to_owned(),
                format!("--rpl-semi-sync-master-timeout={SEMI_SYNC_TIMEOUT_MS}"),
                // A commit becomes visible only once a replica has it: no transaction
                // reads what a failover may lose (AFTER_COMMIT, the default, shows it
                // to others while waiting for the replica).
                "--rpl-semi-sync-master-wait-point=AFTER_SYNC".to_owned(),
                // With the default (ON), a replica's own master side, which nobody
                // acknowledges, makes its SQL thread wait the full timeout on every
                // transaction it applies.
                "--rpl-semi-sync-master-wait-no-slave=OFF".to_owned(),
            ]);
        }
        if self.read_only {
            args.push("--read-only=ON".to_owned());
        }
        args
    }
}

/// PEM files of a self-signed CA and a server certificate it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The directory holding all of them.
    pub dir: PathBuf,
    /// The CA certificate, for clients that verify the server.
    pub ca_cert: PathBuf,
    /// Server certificate for `localhost` and `127.0.0.1`.
    pub server_cert: PathBuf,
    /// The server certificate's private key (PKCS#8).
    pub server_key: PathBuf,
}

/// Self-signed CA + server cert for "localhost"/127.0.0.1, PEM files written into `dir`
/// (created if missing): `ca.pem`, `server-cert.pem`, `server-key.pem`.
pub fn generate_tls(dir: &Path) -> Result<TlsFiles> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };

    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;

    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Sluice sandbox CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).context("signing the CA")?;

    let server_key = KeyPair::generate().context("generating the server key")?;
    // Both names, because clients verify whichever one they were given to connect to.
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params
        .signed_by(&server_key, &ca_cert, &ca_key)
        .context("signing the server certificate")?;

    let files = TlsFiles {
        dir: dir.to_path_buf(),
        ca_cert: dir.join("ca.pem"),
        server_cert: dir.join("server-cert.pem"),
        server_key: dir.join("server-key.pem"),
    };
    write_file(&files.ca_cert, ca_cert.pem().as_bytes())?;
    write_file(&files.server_cert, server_cert.pem().as_bytes())?;
    write_file(&files.server_key, server_key.serialize_pem().as_bytes())?;
    Ok(files)
}

fn write_file(path: &Path, contents: &[u8]) -> Result<()> {
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// Ports handed out by [`free_port`] in this process, so that two threads starting
/// servers at once never get the same one back.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Find a free loopback TCP port for a server.
///
/// Ports come from outside the kernel's ephemeral range when there is room: there, the
/// source port of some outgoing connection can take a port the moment its server stops,
/// and a server restarted on its own port (a crashed Galera node, whose peers know its
/// address) would then fail to bind it.
///
/// Another process can still take the port before the caller binds it;
/// [`MariaDb::start`] retries on a new port when that happens.
pub fn free_port() -> u16 {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    if let Some(range) = non_ephemeral_ports() {
        let span = u32::from(range.end - range.start);
        // Processes start at different places, so that test binaries running at once
        // rarely probe the same ports.
        let start = std::process::id().wrapping_mul(2_654_435_761) % span;
        for step in 0..span {
            let port = range.start + ((start + step) % span) as u16;
            if !handed_out.contains(&port)
                && TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
            {
                handed_out.insert(port);
                return port;
            }
        }
    }
    loop {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .expect("binding 127.0.0.1:0 must work on any machine that runs tests");
        let port = listener
            .local_addr()
            .expect("a bound socket has an address")
            .port();
        if handed_out.insert(port) {
            return port;
        }
    }
}

/// The kernel's ephemeral port range, inclusive (where outgoing connections' source
/// ports come from).
fn ephemeral_ports() -> Option<(u16, u16)> {
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = text.split_whitespace().map(|n| n.parse::<u16>().ok());
    Some((bounds.next()??, bounds.next()??))
}

/// Unprivileged ports below or above the kernel's ephemeral range, if either side has
/// a few thousand of them.
fn non_ephemeral_ports() -> Option<std::ops::Range<u16>> {
    let (low, high) = ephemeral_ports()?;
    const ROOM: u16 = 4000;
    if low >= 10_000 + ROOM {
        Some(10_000..low)
    } else if high <= u16::MAX - ROOM {
        Some(high + 1..u16::MAX)
    } else {
        None
    }
}

/// Send `signal` (a name such as "TERM", "HUP", "KILL") to process `pid` with `kill -s`.
pub fn send_signal(pid: u32, signal: &str) -> Result<()> {
    let output = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .stdin(Stdio::null())
        .output()
        .context("running kill")?;
    if !output.status.success() {
        bail!(
            "kill -s {signal} {pid} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Whether process `pid` exists and has not exited (a zombie counts as exited).
pub fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may itself
        // contain spaces and parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) if Path::new("/proc/self/stat").exists() => false,
        // No procfs (not Linux): ask kill, which cannot tell a zombie apart.
        Err(_) => Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success()),
    }
}

/// Wait until process `pid` (not necessarily our child) has exited, for at most
/// `timeout`; whether it did.
fn wait_process_exit(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while process_alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Wait for `child` to exit, for at most `timeout`.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Path of a MariaDB program: [`BIN_DIR_ENV`] first, then `PATH`, then the directories
/// distributions install server programs into (often missing from a user's `PATH`).
/// Each name is tried in order, so older `mysql*` names can follow the `mariadb*` ones.
pub fn find_program(names: &[&str]) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
        dirs.push(dir.into());
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.extend(
        [
            "/usr/sbin",
            "/usr/local/sbin",
            "/usr/libexec",
            "/usr/local/mysql/bin",
        ]
        .iter()
        .map(PathBuf::from),
    );
    for name in names {
        for dir in &dirs {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "none of {names:?} found in ${BIN_DIR_ENV}, $PATH or the usual sbin directories; \
         install the MariaDB server and client packages"
    )
}

fn mariadbd_path() -> Result<PathBuf> {
    find_program(&["mariadbd", "mysqld"])
}

/// Path of the `mariadb` command-line client.
pub fn client_path() -> Result<PathBuf> {
    find_program(&["mariadb", "mysql"])
}

fn running_as_root() -> bool {
    // Effective uid from procfs, avoiding unsafe libc calls; `id -u` elsewhere.
    if let Ok(status) = fs::read_to_string("/proc/self/status") {
        if let Some(line) = status.lines().find(|l| l.starts_with("Uid:")) {
            return line.split_whitespace().nth(2) == Some("0");
        }
    }
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// mariadbd refuses to run as root unless told to, and rejects `--user` otherwise.
fn user_args() -> Vec<OsString> {
    if running_as_root() {
        vec!["--user=root".into()]
    } else {
        Vec::new()
    }
}

/// The last `max` bytes of a log file, for error messages.
fn tail(path: &Path, max: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max);
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(e) => format!("({} unreadable: {e})", path.display()),
    }
}

/// A process under the watchdog: it is stopped (and its files removed) when this handle
/// is dropped and also when this whole process dies, however it dies. Dropping it stops
/// the process. mariadbd here, and the Sluice instances `sluice bench` starts.
pub struct Supervised {
    /// The watchdog shell; its stdin is the pipe whose closing stops the server.
    watchdog: Option<Child>,
    /// mariadbd's own pid (a child of the watchdog, not of us).
    pid: u32,
}

impl Supervised {
    /// Start `mariadbd args` under the watchdog. `remove` is deleted after the server
    /// exits; `out` receives what the server prints before its error log is open.
    fn spawn(args: &[OsString], remove: Option<&Path>, out: &Path) -> Result<Supervised> {
        Self::spawn_program(&mariadbd_path()?, args, remove, out)
    }

    /// Start `program args` under the watchdog, its stdout and stderr going to `out`.
    pub fn spawn_program(
        program: &Path,
        args: &[OsString],
        remove: Option<&Path>,
        out: &Path,
    ) -> Result<Supervised> {
        Self::spawn_with_env(program, args, &[], remove, out)
    }

    /// [`Supervised::spawn_program`] with extra environment variables for the program.
    fn spawn_with_env(
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        remove: Option<&Path>,
        out: &Path,
    ) -> Result<Supervised> {
        let script = WATCHDOG.replace("GRACE", &WATCHDOG_TERM_GRACE_TENTHS.to_string());
        let mut command = Command::new("bash");
        command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("-c")
            .arg(script)
            .arg("sluice-sandbox-watchdog")
            .arg(remove.map(Path::as_os_str).unwrap_or_default())
            .arg(out)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Own process group: a Ctrl-C aimed at the test runner must not kill the
            // watchdog before it has cleaned up; the closing pipe stops it instead.
            .process_group(0);
        let mut watchdog = command.spawn().context("starting bash for the watchdog")?;
        let stdout = watchdog.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let pid = match read.map(|_| line.trim().parse::<u32>()) {
            Ok(Ok(pid)) => pid,
            other => {
                let _ = watchdog.kill();
                let _ = watchdog.wait();
                bail!("the watchdog did not report the server's pid: {other:?}");
            }
        };
        Ok(Supervised {
            watchdog: Some(watchdog),
            pid,
        })
    }

    /// The supervised process's own pid (a child of the watchdog, not of us).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the supervised process still runs.
    pub fn running(&self) -> bool {
        self.watchdog.is_some() && process_alive(self.pid)
    }

    /// Stop the process and wait (bounded) for the watchdog to finish its cleanup.
    pub fn stop(&mut self) {
        self.stop_with(None);
    }

    /// Stop the process like [`Supervised::stop`] but keep the directory the watchdog
    /// would delete, so that a new watchdog can take it over.
    fn release(&mut self) {
        self.stop_with(Some("keep\n"));
    }

    fn stop_with(&mut self, line: Option<&str>) {
        let Some(mut watchdog) = self.watchdog.take() else {
            return;
        };
        // Closing the pipe is the stop signal; the watchdog escalates to SIGKILL itself.
        // A failed write means the watchdog is gone already, which the wait sees.
        let mut stdin = watchdog.stdin.take();
        if let (Some(stdin), Some(line)) = (stdin.as_mut(), line) {
            let _ = stdin.write_all(line.as_bytes());
        }
        drop(stdin);
        if !matches!(wait_child(&mut watchdog, STOP_TIMEOUT), Ok(Some(_))) {
            // The watchdog is wedged too: do its job, minus the file removal, which
            // the owner of the directory does after us.
            let _ = send_signal(self.pid, "KILL");
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The data directory every server starts from: installed once per process, then
/// copied, because copying takes a fraction of the time `mariadb-install-db` does and
/// tests start several servers (on a 2-core machine: about 1.5 s for the first server
/// of a process, about 0.25 s for each one after it).
struct Template {
    /// The installed data directory (admin account included, no binary log).
    data: PathBuf,
    /// Deletes the template's directory when this process exits: a static is never
    /// dropped, so the same closing-pipe trick as for servers does it.
    _cleanup: Child,
}

static TEMPLATE: Mutex<Option<Template>> = Mutex::new(None);

/// The template data directory, installing it on first use. Concurrent callers wait
/// for the first one rather than installing twice.
fn template() -> Result<PathBuf> {
    let mut template = TEMPLATE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(template) = template.as_ref() {
        return Ok(template.data.clone());
    }
    let installed = install_template()?;
    let data = installed.data.clone();
    *template = Some(installed);
    Ok(data)
}

fn install_template() -> Result<Template> {
    let (root, cleanup) = process_lifetime_dir("sluice-mariadb-template-")?;
    // From here on, dropping `cleanup` (on error) deletes the directory.
    let data = root.join("data");
    install_data_dir(&root, &data)?;
    Ok(Template {
        data,
        _cleanup: cleanup,
    })
}

/// A new temporary directory and the process that deletes it when this process exits
/// (or when the returned child is dropped): for data kept in statics, never dropped.
fn process_lifetime_dir(prefix: &str) -> Result<(PathBuf, Child)> {
    let root = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("creating a template directory")?
        .keep();
    let cleanup = Command::new("bash")
        .args([
            "-c",
            r#"read -r _ || true; rm -rf -- "$1""#,
            "sluice-sandbox-cleanup",
        ])
        .arg(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    match cleanup {
        Ok(child) => Ok((root, child)),
        Err(e) => {
            let _ = fs::remove_dir_all(&root);
            Err(anyhow!(e).context("starting bash for the template cleanup"))
        }
    }
}

/// `mariadb-install-db` into `data`, then one start to create the admin account, which
/// the install step cannot do (it runs the server without grant tables).
fn install_data_dir(root: &Path, data: &Path) -> Result<()> {
    let install_db = find_program(&["mariadb-install-db", "mysql_install_db"])?;
    let log_path = root.join("install.log");
    let log = fs::File::create(&log_path)?;
    // A private tmpdir here too: every mariadbd deletes the `#sql*` files of its tmpdir
    // when it starts, so another process's server starting on the shared /tmp while
    // this one installs takes its temporary tables away ("Unknown table
    // mysql.tmp_user_nopasswd").
    let tmpdir = root.join("tmp");
    fs::create_dir_all(&tmpdir)?;
    let status = Command::new(&install_db)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmpdir.display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ])
        .args(user_args())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("running {}", install_db.display()))?;
    if !status.success() {
        bail!(
            "{} failed ({status}):\n{}",
            install_db.display(),
            tail(&log_path, 4000)
        );
    }

    let socket = root.join("bootstrap.sock");
    let error_log = root.join("bootstrap.err");
    let mut args: Vec<OsString> = vec!["--no-defaults".into()];
    args.extend(user_args());
    args.extend([
        format!("--datadir={}", data.display()).into(),
        format!("--socket={}", socket.display()).into(),
        format!("--pid-file={}", root.join("bootstrap.pid").display()).into(),
        format!("--log-error={}", error_log.display()).into(),
        format!("--tmpdir={}", tmpdir.display()).into(),
        "--skip-networking".into(),
        "--skip-log-bin".into(),
    ]);
    let out = root.join("bootstrap.out");
    let mut server = Supervised::spawn(&args, None, &out)?;
    let root_client = || root_socket_client(&socket);
    wait_ready(server.pid, &error_log, 0, &out, || {
        run_client(root_client()?, "SELECT 1").map(drop)
    })
    .map_err(StartError::into_inner)?;
    let admin_sql = format!(
        "CREATE USER '{ADMIN_USER}'@'%' IDENTIFIED BY '{ADMIN_PASSWORD}';\n\
         GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'%' WITH GRANT OPTION;\n"
    );
    run_client(root_client()?, &admin_sql).context("creating the admin account")?;
    server.stop();
    if process_alive(server.pid) {
        bail!("the bootstrap server did not stop");
    }
    Ok(())
}

/// A `mariadb` client in --batch mode logged in as root over the unix socket `socket`,
/// for servers that are not (yet) reachable as the admin over TCP.
fn root_socket_client(socket: &Path) -> Result<Command> {
    let mut command = Command::new(client_path()?);
    command
        .arg("--no-defaults")
        .arg(format!("--socket={}", socket.display()))
        .args(["--user=root", "--batch", "--connect-timeout=5"]);
    Ok(command)
}

/// Poll until the server at `pid` has logged that it is ready and `probe` succeeds,
/// failing early with the logs if the server exits, and after [`START_TIMEOUT`]. Only
/// the error log after byte `log_from` counts: a restarted server appends to the log
/// of its previous run.
fn wait_ready(
    pid: u32,
    error_log: &Path,
    log_from: u64,
    out: &Path,
    mut probe: impl FnMut() -> Result<()>,
) -> Result<(), StartError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let logs = || {
        format!(
            "error log {}:\n{}\nstdout/stderr:\n{}",
            error_log.display(),
            tail(error_log, 4000),
            tail(out, 2000)
        )
    };
    loop {
        let log = fs::read(error_log).unwrap_or_default();
        let from = usize::try_from(log_from).map_or(0, |from| from.min(log.len()));
        let log = String::from_utf8_lossy(&log[from..]);
        if !process_alive(pid) {
            let err = anyhow!("mariadbd exited during startup; {}", logs());
            // Another process took the port between free_port() and mariadbd's bind.
            return Err(if log.contains("Address already in use") {
                StartError::PortTaken(err)
            } else {
                StartError::Failed(err)
            });
        }
        // Before this line the listening socket may exist while connections still wait
        // for InnoDB recovery; probing earlier would only burn CPU.
        let last_error = if log.contains("ready for connections") {
            match probe() {
                Ok(()) => return Ok(()),
                Err(e) => Some(e),
            }
        } else {
            None
        };
        if Instant::now() >= deadline {
            let last = last_error
                .map(|e| format!("last attempt: {e:#}; "))
                .unwrap_or_default();
            return Err(StartError::Failed(anyhow!(
                "mariadbd did not accept connections within {START_TIMEOUT:?}; {last}{}",
                logs()
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

enum StartError {
    /// Worth retrying on another port.
    PortTaken(anyhow::Error),
    Failed(anyhow::Error),
}

impl StartError {
    fn into_inner(self) -> anyhow::Error {
        match self {
            StartError::PortTaken(e) | StartError::Failed(e) => e,
        }
    }
}

impl From<anyhow::Error> for StartError {
    fn from(e: anyhow::Error) -> Self {
        StartError::Failed(e)
    }
}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        StartError::Failed(e.into())
    }
}

/// Run `client` with `sql` on stdin; stdout on success, an error with stderr otherwise.
fn run_client(mut client: Command, sql: &str) -> Result<String> {
    let mut child = client
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the mariadb client")?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A separate writer, so that a large script and a large result cannot block each
    // other on full pipes.
    let sql = sql.to_owned();
    let writer = thread::spawn(move || stdin.write_all(sql.as_bytes()));
    let output = child
        .wait_with_output()
        .context("waiting for the mariadb client")?;
    let written = writer.join().expect("writer thread does not panic");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        bail!(
            "mariadb client failed ({}): {}",
            output.status,
            stderr.trim()
        );
    }
    // A client that exits early (for example on an error) legitimately leaves input
    // unread; only report the write error when it otherwise succeeded.
    written.context("writing SQL to the mariadb client")?;
    Ok(stdout)
}

/// Copy a data directory: regular files and directories are all mariadbd leaves there.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// A running sandbox server. Dropping it (or [`MariaDb::stop`]) stops the server and
/// deletes its data directory.
pub struct MariaDb {
    /// Temporary directory holding `data/`, `tls/`, the socket and the pid file; the
    /// watchdog deletes it after the server exits.
    root: PathBuf,
    datadir: PathBuf,
    port: u16,
    tls: Option<TlsFiles>,
    server: Supervised,
    /// mariadbd's command line and extra environment, kept for [`MariaDb::restart`].
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

/// How [`MariaDb::start_with`] starts a server, beyond its [`MariaDbOptions`].
struct Launch<'a> {
    /// Copied into the new data directory.
    template: &'a Path,
    /// The port to listen on; `None`: a free one, and another if it is taken meanwhile.
    port: Option<u16>,
    /// Appended to the command line of the first start only, not of restarts.
    first_start_args: Vec<String>,
    /// Environment variables for mariadbd (and the scripts it runs).
    env: Vec<(OsString, OsString)>,
}

impl std::fmt::Debug for MariaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MariaDb")
            .field("port", &self.port)
            .field("pid", &self.server.pid)
            .field("datadir", &self.datadir)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl MariaDb {
    /// Copy the installed template into a fresh temp data dir, start mariadbd on a free
    /// 127.0.0.1 port, and wait (at most 30 s) until the admin account can log in over
    /// TCP. `mariadb-install-db` runs only on the first call in a process.
    pub fn start(opts: MariaDbOptions) -> Result<MariaDb> {
        let template = template()?;
        Self::start_with(
            &opts,
            &Launch {
                template: &template,
                port: None,
                first_start_args: Vec::new(),
                env: Vec::new(),
            },
        )
    }

    fn start_with(opts: &MariaDbOptions, launch: &Launch) -> Result<MariaDb> {
        // A port chosen by the caller is part of a topology: another one would not help.
        let max_attempts = if launch.port.is_some() { 1 } else { 5 };
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::start_once(opts, launch) {
                Ok(server) => return Ok(server),
                Err(StartError::PortTaken(e)) if attempts < max_attempts => {
                    tracing::debug!(error = %e, "sandbox port taken, retrying on another");
                }
                Err(StartError::PortTaken(e) | StartError::Failed(e)) => return Err(e),
            }
        }
    }

    fn start_once(opts: &MariaDbOptions, launch: &Launch) -> Result<MariaDb, StartError> {
        let root = tempfile::Builder::new()
            .prefix("sluice-mariadb-")
            .tempdir()
            .context("creating the server directory")?;
        let datadir = root.path().join("data");
        let socket = root.path().join("mariadbd.sock");
        // sun_path holds 108 bytes; a long $TMPDIR would fail later with a vaguer error.
        if socket.as_os_str().len() > 100 {
            return Err(anyhow!(
                "socket path {} is too long for a unix socket; set TMPDIR to a shorter directory",
                socket.display()
            )
            .into());
        }
        copy_dir(launch.template, &datadir)?;
        let tls = if opts.tls {
            Some(generate_tls(&root.path().join("tls"))?)
        } else {
            None
        };
        let port = launch.port.unwrap_or_else(free_port);
        let error_log = datadir.join("error.log");
        let out = root.path().join("mariadbd.out");
        // A private tmpdir: servers sharing the machine's /tmp have lost their internal
        // temporary-table files to whatever else cleans it.
        let tmpdir = root.path().join("tmp");
        std::fs::create_dir_all(&tmpdir)?;

        let mut args: Vec<OsString> = vec!["--no-defaults".into()];
        args.extend(user_args());
        args.extend(
            [
                format!("--datadir={}", datadir.display()),
                format!("--socket={}", socket.display()),
                format!("--pid-file={}", root.path().join("mariadbd.pid").display()),
                format!("--tmpdir={}", tmpdir.display()),
                format!("--port={port}"),
                "--bind-address=127.0.0.1".into(),
                "--skip-name-resolve".into(),
                // Names every log after "mariadb" rather than the host name, which would
                // make the binlog's name depend on the machine.
                "--log-basename=mariadb".into(),
                format!("--log-error={}", error_log.display()),
                "--innodb-buffer-pool-size=256M".into(),
                // Sandbox data is disposable: syncing every commit would make tests and
                // benchmarks measure the disk instead of the server and the proxy.
                "--innodb-flush-log-at-trx-commit=2".into(),
                "--sync-binlog=0".into(),
                format!("--max-connections={}", opts.max_connections),
                "--max-allowed-packet=1G".into(),
                "--local-infile=1".into(),
                // The binlog is on because Sluice tails it to invalidate its cache.
                "--log-bin".into(),
                "--binlog-format=ROW".into(),
                format!("--server-id={}", opts.server_id),
            ]
            .map(OsString::from),
        );
        if let Some(tls) = &tls {
            args.push(format!("--ssl-ca={}", tls.ca_cert.display()).into());
            args.push(format!("--ssl-cert={}", tls.server_cert.display()).into());
            args.push(format!("--ssl-key={}", tls.server_key.display()).into());
        }
        args.extend(opts.replication_args().into_iter().map(OsString::from));
        args.extend(opts.extra_args.iter().map(OsString::from));
        let mut first_args = args.clone();
        first_args.extend(launch.first_start_args.iter().map(OsString::from));

        let program = mariadbd_path()?;

        // The watchdog owns the directory from here on.
        let root = root.keep();
        let spawned =
            Supervised::spawn_with_env(&program, &first_args, &launch.env, Some(&root), &out);
        let server = match spawned {
            Ok(server) => server,
            Err(e) => {
                let _ = fs::remove_dir_all(&root);
                return Err(e.into());
            }
        };
        let db = MariaDb {
            root,
            datadir,
            port,
            tls,
            server,
            args,
            env: launch.env.clone(),
        };
        // On failure `db` is dropped here, which stops the server and deletes its files.
        wait_ready(db.server.pid, &error_log, 0, &out, || {
            db.execute("SELECT 1").map(drop)
        })?;
        Ok(db)
    }

    /// Start the server again after [`MariaDb::kill`] or [`MariaDb::stop_process`]: same
    /// data directory, port and options, and wait (at most 30 s) until the admin account
    /// can log in, as [`MariaDb::start`] does. Fails if the server still runs, or if
    /// another process took its port meanwhile.
    pub fn restart(&mut self) -> Result<()> {
        if self.running() {
            bail!(
                "mariadbd {} on port {} still runs; kill or stop it before restarting it",
                self.server.pid,
                self.port
            );
        }
        let error_log = self.datadir.join("error.log");
        let log_from = fs::metadata(&error_log).map_or(0, |meta| meta.len());
        let out = self.root.join("mariadbd.out");
        let program = mariadbd_path()?;
        let mut args = self.args.clone();
        if let Some(position) = self.galera_recovered_position()? {
            args.push(format!("--wsrep-start-position={position}").into());
        }
        // The old watchdog still guards the files (it deletes them if we die); it hands
        // them over to the new one instead.
        self.server.release();
        self.server =
            Supervised::spawn_with_env(&program, &args, &self.env, Some(&self.root), &out)?;
        wait_ready(self.server.pid, &error_log, log_from, &out, || {
            self.execute("SELECT 1").map(drop)
        })
        .map_err(StartError::into_inner)
        .with_context(|| format!("restarting the server on port {}", self.port))
    }

    /// Stop the server process cleanly (SIGTERM, then SIGKILL if it is still running
    /// after 30 s) and wait until it is gone, keeping its files for
    /// [`MariaDb::restart`]. Does nothing if it is not running.
    pub fn stop_process(&mut self) -> Result<()> {
        let pid = self.server.pid;
        if !process_alive(pid) {
            return Ok(());
        }
        send_signal(pid, "TERM")?;
        if wait_process_exit(pid, STOP_TIMEOUT) {
            return Ok(());
        }
        tracing::warn!(
            pid,
            "mariadbd ignored SIGTERM for {STOP_TIMEOUT:?}, killing it"
        );
        self.kill()
    }

    /// Whether the server process runs (false after [`MariaDb::kill`] and
    /// [`MariaDb::stop_process`], until [`MariaDb::restart`]).
    pub fn running(&self) -> bool {
        self.server.running()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// The TLS files the server uses, when started with `tls: true`.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// The data directory (it holds `error.log` and the binary logs).
    pub fn datadir(&self) -> &Path {
        &self.datadir
    }

    /// The unix socket the server also listens on.
    pub fn socket(&self) -> PathBuf {
        self.root.join("mariadbd.sock")
    }

    /// mariadbd's process id.
    pub fn pid(&self) -> u32 {
        self.server.pid
    }

    /// The server's error log so far.
    pub fn error_log(&self) -> String {
        // Lossy: one byte that is not UTF-8 must not make the whole log read as empty.
        fs::read(self.datadir.join("error.log"))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// A `mariadb` client command logged in as the admin over TCP, to which callers add
    /// their own arguments.
    pub fn admin_client(&self) -> Result<Command> {
        let mut command = Command::new(client_path()?);
        command.arg("--no-defaults").args([
            "--protocol=TCP",
            "--host=127.0.0.1",
            &format!("--port={}", self.port),
            &format!("--user={ADMIN_USER}"),
            &format!("--password={ADMIN_PASSWORD}"),
            "--connect-timeout=10",
            "--max-allowed-packet=1G",
        ]);
        // Clients that verify certificates by default need the CA to trust ours.
        if let Some(tls) = &self.tls {
            command.arg(format!("--ssl-ca={}", tls.ca_cert.display()));
        }
        Ok(command)
    }

    /// Run SQL as the admin over TCP with the `mariadb` CLI in --batch mode; returns stdout; error includes stderr.
    pub fn execute(&self, sql: &str) -> Result<String> {
        let mut client = self.admin_client()?;
        client.arg("--batch");
        run_client(client, sql).with_context(|| format!("executing on {}: {sql:.200}", self.addr()))
    }

    /// SIGKILL the server now, as a crash would, and wait (at most 10 s) until it is
    /// gone. Its files stay until the handle is dropped.
    pub fn kill(&self) -> Result<()> {
        send_signal(self.server.pid, "KILL")?;
        if !wait_process_exit(self.server.pid, Duration::from_secs(10)) {
            bail!(
                "mariadbd {} still alive 10 s after SIGKILL",
                self.server.pid
            );
        }
        Ok(())
    }

    /// Stop the server (SIGTERM, wait bounded, then SIGKILL) and remove the data dir. Also done on Drop.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.server.stop();
        // Normally the watchdog has deleted it already; this covers a wedged watchdog.
        if self.root.exists() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let ports: HashSet<u16> = (0..50).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 50);
    }

    #[test]
    fn free_ports_stay_out_of_the_ephemeral_range() {
        let (low, high) = ephemeral_ports().expect("Linux tells its ephemeral range");
        let range = non_ephemeral_ports().expect("Linux's default range leaves room");
        assert!(range.end <= low || range.start > high, "{range:?}");
        for _ in 0..20 {
            assert!(range.contains(&free_port()));
        }
    }

    #[test]
    fn tls_files_are_pem() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate_tls(dir.path()).unwrap();
        let ca = fs::read_to_string(&files.ca_cert).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let key = fs::read_to_string(&files.server_key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    }

    #[test]
    fn own_process_is_alive_and_a_bogus_pid_is_not() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX - 1));
    }
}
