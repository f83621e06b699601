//! Data directories: the installed template each server copies, waiting for a server to
//! accept connections, and running SQL through the command-line client.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::process::*;
use crate::supervised::*;
use crate::{ADMIN_PASSWORD, ADMIN_USER, START_TIMEOUT};

/// The data directory every server starts from: installed once per process, then
/// copied, because copying takes a fraction of the time `mariadb-install-db` does and
/// tests start several servers (on a 2-core machine: about 1.5 s for the first server
/// of a process, about 0.25 s for each one after it).
pub(crate) struct Template {
    /// The installed data directory (admin account included, no binary log).
    data: PathBuf,
    /// Deletes the template's directory when this process exits: a static is never
    /// dropped, so the same closing-pipe trick as for servers does it.
    _cleanup: Child,
}

pub(crate) static TEMPLATE: Mutex<Option<Template>> = Mutex::new(None);

/// The template data directory, installing it on first use. Concurrent callers wait
/// for the first one rather than installing twice.
pub(crate) fn template() -> Result<PathBuf> {
    let mut template = TEMPLATE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(template) = template.as_ref() {
        return Ok(template.data.clone());
    }
    let installed = install_template()?;
    let data = installed.data.clone();
    *template = Some(installed);
    Ok(data)
}

pub(crate) fn install_template() -> Result<Template> {
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
pub(crate) fn process_lifetime_dir(prefix: &str) -> Result<(PathBuf, Child)> {
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
pub(crate) fn root_socket_client(socket: &Path) -> Result<Command> {
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
pub(crate) fn wait_ready(
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

pub(crate) enum StartError {
    /// Worth retrying on another port.
    PortTaken(anyhow::Error),
    Failed(anyhow::Error),
}

impl StartError {
    pub(crate) fn into_inner(self) -> anyhow::Error {
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
pub(crate) fn run_client(mut client: Command, sql: &str) -> Result<String> {
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
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<()> {
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
