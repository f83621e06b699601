//! The real `mariadb` command-line client, pointed at a server or at Sluice.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use sluice_sandbox as sandbox;

/// What one client run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliOutput {
    /// Exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    /// Standard output as bytes, for binary results (`--raw`).
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
}

impl CliOutput {
    /// Asserts that this run (through Sluice) printed exactly what `direct` printed.
    #[track_caller]
    pub fn assert_same_as(&self, direct: &CliOutput) {
        assert_eq!(
            direct.stderr,
            self.stderr,
            "stderr differs: {}",
            super::first_difference(&direct.stderr, &self.stderr)
        );
        assert_eq!(
            direct.stdout,
            self.stdout,
            "stdout differs: {}",
            super::first_difference(&direct.stdout, &self.stdout)
        );
    }

    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Panic with everything the client printed unless it exited 0.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.success(),
            "mariadb client failed (exit {:?})\nstderr: {}\nstdout: {:.2000}",
            self.code,
            self.stderr,
            self.stdout
        );
        self
    }
}

/// A `mariadb` client invocation: `--no-defaults`, TCP (to 127.0.0.1 unless told
/// otherwise) or a Unix socket, the given account.
#[derive(Debug, Clone)]
pub struct Client {
    host: String,
    port: u16,
    socket: Option<std::path::PathBuf>,
    user: String,
    password: String,
    database: Option<String>,
    args: Vec<String>,
    stdin: Vec<u8>,
    timeout: Duration,
}

impl Client {
    pub fn new(port: u16, user: &str, password: &str) -> Client {
        Client {
            host: "127.0.0.1".to_owned(),
            port,
            socket: None,
            user: user.to_owned(),
            password: password.to_owned(),
            database: None,
            args: Vec::new(),
            stdin: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }

    /// The test account every backend has ([`super::NATIVE_USER`]).
    pub fn native(port: u16) -> Client {
        Client::new(port, super::NATIVE_USER, super::NATIVE_PASSWORD)
    }

    /// Connect over the Unix socket at `path` instead of TCP.
    pub fn socket(mut self, path: &std::path::Path) -> Client {
        self.socket = Some(path.to_owned());
        self
    }

    /// Connect to `host` instead of 127.0.0.1.
    pub fn host(mut self, host: &str) -> Client {
        self.host = host.to_owned();
        self
    }

    pub fn database(mut self, database: &str) -> Client {
        self.database = Some(database.to_owned());
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Client {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Client {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Client {
        self.stdin = input.into();
        self
    }

    /// Longest the run may take before it is killed and the test fails (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// The command line, without stdin.
    pub fn command(&self) -> Command {
        let client = sandbox::client_path().expect("the mariadb client is installed");
        let mut command = Command::new(client);
        command.arg("--no-defaults");
        match &self.socket {
            None => command.args([
                "--protocol=TCP".to_owned(),
                format!("--host={}", self.host),
                format!("--port={}", self.port),
            ]),
            Some(path) => command.args([
                "--protocol=SOCKET".to_owned(),
                format!("--socket={}", path.display()),
            ]),
        };
        command.args([
            format!("--user={}", self.user),
            // An empty value means "no password" without prompting.
            format!("--password={}", self.password),
            "--connect-timeout=10".to_owned(),
        ]);
        if let Some(database) = &self.database {
            command.arg(format!("--database={database}"));
        }
        command.args(&self.args);
        command
    }

    /// Start the client in the background with stdin, stdout and stderr piped.
    pub fn spawn(&self) -> Child {
        self.command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the mariadb client")
    }

    /// Start the client in the background with its result discarded (for endless
    /// results) and stderr piped; stdin is closed.
    pub fn spawn_discarding_output(&self) -> Child {
        self.command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the mariadb client")
    }

    /// Run to completion, feeding the configured stdin; panics past the timeout.
    #[track_caller]
    pub fn run(&self) -> CliOutput {
        let child = self.spawn();
        finish(
            child,
            self.stdin.clone(),
            self.timeout,
            &format!("{self:?}"),
        )
    }

    /// `--batch` with `sql` on stdin: tab-separated output with a header line.
    #[track_caller]
    pub fn query(&self, sql: &str) -> CliOutput {
        self.clone().arg("--batch").stdin(sql).run()
    }

    /// Like [`Client::query`], but without the header line and asserting success:
    /// stdout only.
    #[track_caller]
    pub fn query_ok(&self, sql: &str) -> String {
        let output = self
            .clone()
            .args(["--batch", "--skip-column-names"])
            .stdin(sql)
            .run();
        output.assert_success();
        output.stdout
    }
}

/// Feed `input` to a spawned client, collect its output, and wait at most `timeout`.
#[track_caller]
pub fn finish(mut child: Child, input: Vec<u8>, timeout: Duration, what: &str) -> CliOutput {
    let stdin = child.stdin.take();
    // Writer and readers on their own threads: a large input and a large output must
    // not deadlock on full pipes.
    let writer = thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A client that exits early leaves input unread: not our failure to report.
            let _ = stdin.write_all(&input);
        }
    });
    let stdout = child.stdout.take().map(reader);
    let stderr = child.stderr.take().map(reader);
    let status = sandbox::wait_child(&mut child, timeout).expect("waiting for the client");
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let stderr = stderr
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        panic!(
            "mariadb client still running after {timeout:?}: {what}\nstderr so far: {}",
            String::from_utf8_lossy(&stderr)
        );
    };
    let _ = writer.join();
    let stdout = stdout
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    let stderr = stderr
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    CliOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stdout_bytes: stdout,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn reader(mut source: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buffer = Vec::new();
        let _ = source.read_to_end(&mut buffer);
        buffer
    })
}

/// A `mariadb` client kept open, fed one statement at a time: one session whose
/// statements can be interleaved with other sessions'. Output and errors come in the
/// order the client printed them (`--batch --force --unbuffered`, errors merged in).
pub struct Interactive {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    marks: u64,
}

impl Interactive {
    /// Starts `client` with `--batch --skip-column-names --force --unbuffered`.
    pub fn start(client: &Client) -> Interactive {
        let (read, write) = std::io::pipe().expect("a pipe");
        let mut child = client
            .command()
            .args(["--batch", "--skip-column-names", "--force", "--unbuffered"])
            .stdin(Stdio::piped())
            .stdout(write.try_clone().expect("a pipe"))
            .stderr(write)
            .spawn()
            .expect("starting the mariadb client");
        let stdin = child.stdin.take().expect("piped stdin");
        let (tx, lines) = std::sync::mpsc::channel();
        thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(read).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Interactive {
            child,
            stdin,
            lines,
            marks: 0,
        }
    }

    /// Runs `sql` (one or more statements, each ending with `;`) and returns every line
    /// printed for it, errors included, once a marker statement after it has answered.
    #[track_caller]
    pub fn run(&mut self, sql: &str) -> Vec<String> {
        self.marks += 1;
        let mark = format!("--mark {}--", self.marks);
        writeln!(self.stdin, "{sql}\nSELECT '{mark}';").expect("writing to the client");
        let mut out = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if line == mark => return out,
                Ok(line) => out.push(line),
                Err(e) => panic!("mariadb client: no answer to {sql:?} ({e}); so far {out:?}"),
            }
        }
    }

    /// The one line `sql` printed.
    #[track_caller]
    pub fn value(&mut self, sql: &str) -> String {
        let lines = self.run(sql);
        assert_eq!(lines.len(), 1, "{sql}: {lines:?}");
        lines.into_iter().next().unwrap_or_default()
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
