//! Processes and ports: free loopback ports, signals, waiting for exits, finding the
//! MariaDB programs.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::BIN_DIR_ENV;

/// Ports handed out by [`free_port`] in this process, so that two threads starting
/// servers at once never get the same one back.
pub(crate) static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

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
pub(crate) fn ephemeral_ports() -> Option<(u16, u16)> {
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = text.split_whitespace().map(|n| n.parse::<u16>().ok());
    Some((bounds.next()??, bounds.next()??))
}

/// Unprivileged ports below or above the kernel's ephemeral range, if either side has
/// a few thousand of them.
pub(crate) fn non_ephemeral_ports() -> Option<std::ops::Range<u16>> {
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
pub(crate) fn wait_process_exit(pid: u32, timeout: Duration) -> bool {
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

pub(crate) fn mariadbd_path() -> Result<PathBuf> {
    find_program(&["mariadbd", "mysqld"])
}

/// Path of the `mariadb` command-line client.
pub fn client_path() -> Result<PathBuf> {
    find_program(&["mariadb", "mysql"])
}

pub(crate) fn running_as_root() -> bool {
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
pub(crate) fn user_args() -> Vec<OsString> {
    if running_as_root() {
        vec!["--user=root".into()]
    } else {
        Vec::new()
    }
}

/// The last `max` bytes of a log file, for error messages.
pub(crate) fn tail(path: &Path, max: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max);
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        }
        Err(e) => format!("({} unreadable: {e})", path.display()),
    }
}
