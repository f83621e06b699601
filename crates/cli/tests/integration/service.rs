//! Sluice as a system service: the Debian package `make deb` builds (cargo-deb), what
//! it holds, its installation into a scratch root (never the live system), its systemd
//! unit as `systemd-analyze verify` reads it, its configuration file, and the `Type=notify`
//! messages `sluice serve` sends to systemd.
//!
//! Needs root (dpkg's `--root` installs files owned by another user, and `chroot`),
//! cargo-deb (`make deps` installs it) and systemd-analyze (the `systemd` package).

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::proxy::SLUICE_BIN;
use crate::support::wire::RawConn;
use crate::support::{free_port, repo_root, sandbox, Config};

/// What the unit must say; each line exactly, in the package's copy.
const UNIT_LINES: &[&str] = &[
    "Type=notify",
    "ExecStart=/usr/bin/sluice serve --config /etc/sluice/sluice.toml",
    "ExecReload=/usr/bin/sluice upgrade --config /etc/sluice/sluice.toml",
    "Restart=on-failure",
    "User=sluice",
    "LimitNOFILE=65536",
    "StateDirectory=sluice",
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectControlGroups=yes",
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    "RestrictNamespaces=yes",
    "LockPersonality=yes",
    "MemoryDenyWriteExecute=yes",
    "SystemCallFilter=@system-service",
];

/// The package, built once per test process: `cargo build --release -p sluice-cli`
/// (nothing to do when `make test` built it first), then `cargo deb --no-build`, as
/// `make deb` does. Its path, or why it could not be built.
fn package() -> &'static Path {
    static PACKAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = PACKAGE.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let build = run(Command::new(&cargo).current_dir(repo_root()).args([
            "build",
            "--release",
            "-p",
            "sluice-cli",
        ]));
        if !build.status.success() {
            return Err(format!("cargo build --release failed:\n{}", text(&build)));
        }
        let deb = run(Command::new(&cargo).current_dir(repo_root()).args([
            "deb",
            "-p",
            "sluice-cli",
            "--no-build",
        ]));
        if !deb.status.success() {
            return Err(format!(
                "cargo deb failed (is cargo-deb installed? `make deps` installs it):\n{}",
                text(&deb)
            ));
        }
        // cargo-deb prints the paths of the package and of its -dbgsym package.
        let path = String::from_utf8_lossy(&deb.stdout)
            .lines()
            .map(|l| PathBuf::from(l.trim()))
            .find(|p| p.extension() == Some(OsStr::new("deb")))
            .unwrap_or_default();
        if path.extension() == Some(OsStr::new("deb")) && path.is_file() {
            Ok(path)
        } else {
            Err(format!("no .deb where cargo deb said:\n{}", text(&deb)))
        }
    });
    match built {
        Ok(path) => path,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn package_holds_the_binary_the_unit_the_conffile_and_the_scripts() {
    let deb = package();
    let info = checked(Command::new("dpkg-deb").arg("--info").arg(deb));
    for field in [
        "Package: sluice",
        "systemd | systemd-standalone-sysusers",
        "init-system-helpers",
    ] {
        assert!(info.contains(field), "{field} missing from:\n{info}");
    }
    for script in ["postinst", "prerm", "postrm", "conffiles"] {
        assert!(
            info.lines()
                .any(|l| l.split_whitespace().any(|w| w == script)),
            "no {script} in the control archive:\n{info}"
        );
    }

    let contents = checked(Command::new("dpkg-deb").arg("--contents").arg(deb));
    for (path, mode) in [
        ("./usr/bin/sluice", "-rwxr-xr-x"),
        ("./usr/lib/systemd/system/sluice.service", "-rw-r--r--"),
        ("./usr/lib/sysusers.d/sluice.conf", "-rw-r--r--"),
        ("./etc/sluice/sluice.toml", "-rw-r-----"),
        ("./usr/share/doc/sluice/OPERATIONS.md", "-rw-r--r--"),
    ] {
        let line = contents
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")))
            .unwrap_or_else(|| panic!("{path} is not in the package:\n{contents}"));
        assert!(line.starts_with(mode), "{path} is not {mode}: {line}");
    }

    let control = tempfile::tempdir().unwrap();
    checked(
        Command::new("dpkg-deb")
            .arg("--control")
            .arg(deb)
            .arg(control.path()),
    );
    let conffiles = fs::read_to_string(control.path().join("conffiles")).unwrap();
    assert_eq!(conffiles.trim(), "/etc/sluice/sluice.toml");
    for script in ["postinst", "prerm", "postrm"] {
        let packaged = fs::read(control.path().join(script)).unwrap();
        let source = fs::read(repo_root().join("packaging/debian").join(script)).unwrap();
        assert!(
            packaged == source,
            "the packaged {script} is not packaging/debian/{script}"
        );
    }

    let root = tempfile::tempdir().unwrap();
    checked(Command::new("dpkg-deb").arg("-x").arg(deb).arg(root.path()));
    let unit =
        fs::read_to_string(root.path().join("usr/lib/systemd/system/sluice.service")).unwrap();
    for line in UNIT_LINES {
        assert!(
            unit.lines().any(|l| l == *line),
            "the unit has no line {line:?}:\n{unit}"
        );
    }
    // The configuration is the README's example, comments aside.
    let packaged: toml::Table =
        toml::from_str(&fs::read_to_string(root.path().join("etc/sluice/sluice.toml")).unwrap())
            .unwrap();
    assert_eq!(
        packaged,
        readme_example(),
        "sluice.toml and the README's example differ"
    );
    let sysusers = fs::read_to_string(root.path().join("usr/lib/sysusers.d/sluice.conf")).unwrap();
    assert!(
        sysusers.lines().any(|l| l.starts_with("u sluice ")),
        "no sluice user in sysusers.d:\n{sysusers}"
    );
    // The binary runs, is of this version, and is stripped of its debug information.
    let version = checked(Command::new(root.path().join("usr/bin/sluice")).arg("--version"));
    assert_eq!(
        version.trim(),
        concat!("sluice-cli ", env!("CARGO_PKG_VERSION"))
    );
    let size = fs::metadata(root.path().join("usr/bin/sluice"))
        .unwrap()
        .len();
    assert!(
        size < 64 << 20,
        "the packaged binary has {size} bytes: not stripped?"
    );
}

/// The README's configuration example (the TOML block after "With a file").
fn readme_example() -> toml::Table {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let block = readme
        .split_once("With a file")
        .and_then(|(_, rest)| rest.split_once("```toml\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("a TOML block after \"With a file\" in the README");
    toml::from_str(block).unwrap()
}

/// A scratch root that `dpkg --root` can install into: an empty dpkg database, and
/// stand-ins for `systemctl` and `deb-systemd-invoke` that record any call, and for
/// `ischroot`, which says "not a chroot".
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        let dir = tempfile::Builder::new()
            .prefix("sluice-deb-root-")
            .tempdir()
            .unwrap();
        let dpkg = dir.path().join("root/var/lib/dpkg");
        for sub in ["info", "updates", "triggers"] {
            fs::create_dir_all(dpkg.join(sub)).unwrap();
        }
        fs::write(dpkg.join("status"), "").unwrap();
        fs::write(dpkg.join("available"), "").unwrap();
        fs::create_dir_all(dir.path().join("root/etc")).unwrap();
        let stubs = dir.path().join("stubs");
        fs::create_dir(&stubs).unwrap();
        let calls = dir.path().join("calls");
        for (name, script) in [
            (
                "systemctl",
                format!("echo \"systemctl $*\" >> '{}'", calls.display()),
            ),
            (
                "deb-systemd-invoke",
                format!("echo \"deb-systemd-invoke $*\" >> '{}'", calls.display()),
            ),
            // Not a chroot, whatever the mount namespace below looks like.
            ("ischroot", "exit 1".to_owned()),
        ] {
            let stub = stubs.join(name);
            fs::write(&stub, format!("#!/bin/sh\n{script}\n")).unwrap();
            fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Root { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// `dpkg --root` with `args`, the maintainer scripts run outside a chroot with
    /// DPKG_ROOT set (`--force-script-chrootless`: the root has no shell of its own),
    /// and without the packages the root lacks (`--force-depends`).
    ///
    /// dpkg runs in a mount namespace of its own where /run/systemd/system exists, as on
    /// a machine booted with systemd (this one may not be), and `ischroot` says no: only
    /// DPKG_ROOT then keeps the scripts from starting, restarting or stopping the
    /// service, which the stand-ins would record.
    fn dpkg(&self, args: &[&OsStr]) -> String {
        let path = format!(
            "{}:{}",
            self.dir.path().join("stubs").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        checked(
            Command::new("unshare")
                .args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg("mount -t tmpfs sluice-test /run && mkdir -p /run/systemd/system && exec \"$@\"")
                .args(["sh", "dpkg"])
                .arg(format!("--root={}", self.path().display()))
                .arg(format!(
                    "--log={}",
                    self.dir.path().join("dpkg.log").display()
                ))
                .args(["--force-script-chrootless", "--force-depends"])
                .args(args)
                .env("PATH", path),
        )
    }

    /// What the stand-ins were asked to do.
    fn calls(&self) -> String {
        fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default()
    }

    /// NAME's numeric id in the root's `passwd` or `group`.
    fn id(&self, file: &str, name: &str) -> Option<u32> {
        fs::read_to_string(self.path().join("etc").join(file))
            .unwrap_or_default()
            .lines()
            .find(|l| l.split(':').next() == Some(name))
            .and_then(|l| l.split(':').nth(2)?.parse().ok())
    }
}

/// `getent passwd sluice` on this machine: the test must leave it as it was.
fn host_account() -> String {
    let out = run(Command::new("getent").args(["passwd", "sluice"]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn package_installs_into_a_root_and_starts_nothing() {
    let deb = package();
    let host_before = host_account();
    let root = Root::new();
    let r = root.path();
    root.dpkg(&["-i".as_ref(), deb.as_os_str()]);

    let status = root.dpkg(&["-s".as_ref(), "sluice".as_ref()]);
    assert!(
        status.contains("Status: install ok installed"),
        "not installed:\n{status}"
    );
    assert!(
        status.contains("/etc/sluice/sluice.toml"),
        "the configuration is not a conffile:\n{status}"
    );
    // The account, from sysusers.d, in the root's files.
    let passwd = fs::read_to_string(r.join("etc/passwd")).unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("sluice:"))
        .unwrap_or_else(|| panic!("no sluice user in the root:\n{passwd}"));
    assert!(
        line.ends_with(":/var/lib/sluice:/usr/sbin/nologin"),
        "sluice's home and shell: {line}"
    );
    let uid = root.id("passwd", "sluice").unwrap();
    let gid = root.id("group", "sluice").expect("a sluice group");
    assert!(uid < 1000, "not a system user: {line}");
    // Who may read the configuration and write the state.
    for (path, owner, mode) in [
        ("etc/sluice", (0, gid), 0o750),
        ("etc/sluice/sluice.toml", (0, gid), 0o640),
        ("var/lib/sluice", (uid, gid), 0o750),
    ] {
        let meta = fs::metadata(r.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), owner, "owner of /{path}");
        assert_eq!(meta.mode() & 0o7777, mode, "mode of /{path}");
    }
    // Neither enabled nor started, nothing asked of systemd.
    assert!(
        !r.join("etc/systemd/system/multi-user.target.wants/sluice.service")
            .exists(),
        "the unit was enabled at installation"
    );
    // The same package again: the upgrade path, which restarts a running service on
    // a live system, and must not in a root being built.
    root.dpkg(&["-i".as_ref(), deb.as_os_str()]);
    assert_eq!(
        root.calls(),
        "",
        "systemd was asked to act in a --root install"
    );

    // The configuration the package installs passes check-config as the installed
    // system sees it: the packaged binary, chrooted into the root.
    with_shared_libraries(&r.join("usr/bin/sluice"), &r);
    let check = run(Command::new("chroot").arg(&r).args([
        "/usr/bin/sluice",
        "check-config",
        "/etc/sluice/sluice.toml",
    ]));
    assert!(
        check.status.success(),
        "the packaged configuration is refused:\n{}",
        text(&check)
    );

    // Removal keeps the configuration; purge takes it and the state away.
    root.dpkg(&["--remove".as_ref(), "sluice".as_ref()]);
    assert!(r.join("etc/sluice/sluice.toml").exists());
    assert!(!r.join("usr/bin/sluice").exists());
    root.dpkg(&["--purge".as_ref(), "sluice".as_ref()]);
    assert!(!r.join("etc/sluice/sluice.toml").exists());
    assert!(!r.join("var/lib/sluice").exists());
    assert_eq!(
        root.calls(),
        "",
        "systemd was asked to act in a --root install"
    );
    assert_eq!(
        host_account(),
        host_before,
        "the install changed this machine's accounts"
    );
}

/// Copies the shared libraries `binary` loads (as `ldd` lists them) into `root`, at the
/// same paths, so that it runs chrooted there.
fn with_shared_libraries(binary: &Path, root: &Path) {
    let ldd = checked(Command::new("ldd").arg(binary));
    for word in ldd.split_whitespace().filter(|w| w.starts_with('/')) {
        let target = root.join(word.trim_start_matches('/'));
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::copy(word, &target).unwrap_or_else(|e| panic!("copying {word}: {e}"));
    }
}

#[test]
fn unit_passes_systemd_analyze_verify() {
    let deb = package();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    checked(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root));
    // verify checks that the programs of ExecStart and ExecReload exist: the copy points
    // at the package's binary, where the installed unit has /usr/bin/sluice. Nothing
    // else changes.
    let unit = fs::read_to_string(root.join("usr/lib/systemd/system/sluice.service")).unwrap();
    let binary = root.join("usr/bin/sluice");
    let mut copy = unit.clone();
    for setting in ["ExecStart", "ExecReload"] {
        let before = copy.clone();
        copy = copy.replace(
            &format!("\n{setting}=/usr/bin/sluice "),
            &format!("\n{setting}={} ", binary.display()),
        );
        assert_ne!(copy, before, "no {setting}=/usr/bin/sluice in the unit");
    }
    let units = dir.path().join("units");
    fs::create_dir(&units).unwrap();
    let path = units.join("sluice.service");
    fs::write(&path, copy).unwrap();

    let verify = run(Command::new("systemd-analyze").arg("verify").arg(&path));
    // An unknown or malformed setting is a warning with exit code 0: any output fails.
    assert!(
        verify.status.success() && text(&verify).trim().is_empty(),
        "systemd-analyze verify:\n{}",
        text(&verify)
    );

    // The hardening as systemd rates it: 0 (best) to 10; a plain service is 9.6.
    let security = run(Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&path));
    let report = text(&security);
    let exposure: f64 = report
        .lines()
        .find_map(|l| l.split("exposure level for sluice.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    assert!(exposure <= 2.0, "exposure {exposure}:\n{report}");
}

/// A `sluice serve` started with NOTIFY_SOCKET, as systemd starts a `Type=notify`
/// service. Killed on drop; a watchdog kills it too if the test process dies first.
struct Notified {
    child: Child,
    watchdog: Child,
    watchdog_stdin: Option<ChildStdin>,
    log: PathBuf,
}

impl Notified {
    fn start(dir: &Path, config: &Path, socket: &Path) -> Notified {
        let log = dir.join("sluice.log");
        let file = fs::File::create(&log).unwrap();
        let child = Command::new(SLUICE_BIN)
            .args([OsStr::new("serve"), "--config".as_ref(), config.as_os_str()])
            .env("NOTIFY_SOCKET", socket)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("starting sluice");
        let mut watchdog = crate::support::proxy::watchdog(child.id(), dir);
        let watchdog_stdin = watchdog.stdin.take();
        Notified {
            child,
            watchdog,
            watchdog_stdin,
            log,
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        sandbox::send_signal(self.child.id(), name).expect("signalling sluice");
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(mut stdin) = self.watchdog_stdin.take() {
            let _ = stdin.write_all(b"forget\n");
        }
        let _ = self.watchdog.wait();
    }
}

/// The next message on `socket`, waiting at most `timeout`.
fn next_message(socket: &UnixDatagram, timeout: Duration, sluice: &mut Notified) -> String {
    socket.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 4096];
    match socket.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => panic!(
            "no message from sluice within {timeout:?} ({e}); its exit status: {:?}; log:\n{}",
            sluice.child.try_wait(),
            sluice.log()
        ),
    }
}

#[test]
fn serve_tells_systemd_it_is_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    // No server answers at this address: Sluice starts without one, and keeps trying.
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config = Config::new(nowhere);
    let config_path = dir.path().join("sluice.toml");
    config.write(&config_path);
    let listener = SocketAddr::from(([127, 0, 0, 1], config.port()));

    let mut sluice = Notified::start(dir.path(), &config_path, &socket_path);
    let ready = next_message(&socket, Duration::from_secs(30), &mut sluice);
    assert_eq!(ready, "READY=1\n");
    // READY=1 means clients are served: the first connect gets the greeting.
    let conn = RawConn::connect(listener).unwrap_or_else(|e| {
        panic!(
            "READY=1 came before the listener served: {e}; log:\n{}",
            sluice.log()
        )
    });
    assert!(!conn.greeting.server_version.is_empty());

    // A reload is RELOADING=1 (with the time systemd's notify-reload wants), then
    // READY=1 once the file is read again.
    sluice.signal("HUP");
    let reloading = next_message(&socket, Duration::from_secs(10), &mut sluice);
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading:?}");
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    let ready = next_message(&socket, Duration::from_secs(10), &mut sluice);
    assert_eq!(ready, "READY=1\n");
    assert!(
        sluice.log().contains("configuration reloaded"),
        "{}",
        sluice.log()
    );

    sluice.signal("TERM");
    let stopping = next_message(&socket, Duration::from_secs(10), &mut sluice);
    assert_eq!(stopping, "STOPPING=1\n");
    let status = sandbox::wait_child(&mut sluice.child, Duration::from_secs(30))
        .unwrap()
        .unwrap_or_else(|| panic!("sluice still runs 30 s after SIGTERM:\n{}", sluice.log()));
    assert!(status.success(), "{status}:\n{}", sluice.log());

    // Without a terminal (the journal reads stderr), no colour codes.
    let log = sluice.log();
    assert!(!log.contains('\x1b'), "ANSI escapes in the log:\n{log}");
}

fn run(command: &mut Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

/// `command`'s stdout, which must succeed.
#[track_caller]
fn checked(command: &mut Command) -> String {
    let out = run(command);
    assert!(out.status.success(), "{command:?} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_reload_hands_over_and_tells_systemd_the_new_main_process() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let handover = dir.path().join("handover.sock");
    let config = Config::new(nowhere).handover("socket", handover.to_str().unwrap());
    let config_path = dir.path().join("sluice.toml");
    config.write(&config_path);

    let mut sluice = Notified::start(dir.path(), &config_path, &socket_path);
    let ready = next_message(&socket, Duration::from_secs(30), &mut sluice);
    assert_eq!(ready, "READY=1\n");
    // What ExecReload runs.
    let out = crate::support::proxy::run_sluice_within(
        &["upgrade", "--config", config_path.to_str().unwrap()],
        Duration::from_secs(120),
    );
    assert!(out.success(), "{out:?}\n{}", sluice.log());
    let answer: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let pid = answer["pid"].as_u64().unwrap() as u32;
    let successor = Successor(pid);
    // The old process, still the main one, names the new one: a READY=1 of the new
    // process's own would come before it is the main one, and be refused.
    let handed = next_message(&socket, Duration::from_secs(10), &mut sluice);
    assert_eq!(handed, format!("MAINPID={pid}\nREADY=1\n"));
    let status = sandbox::wait_child(&mut sluice.child, Duration::from_secs(30))
        .unwrap()
        .unwrap_or_else(|| panic!("the old process runs on:\n{}", sluice.log()));
    assert!(status.success(), "{status}:\n{}", sluice.log());
    // The next word is the new main process's, at its own stop: it said nothing before.
    sandbox::send_signal(successor.0, "TERM").unwrap();
    let stopping = next_message(&socket, Duration::from_secs(10), &mut sluice);
    assert_eq!(stopping, "STOPPING=1\n", "{}", sluice.log());
}

/// A process the service's main process started (its successor), killed however the
/// test ends.
struct Successor(u32);

impl Drop for Successor {
    fn drop(&mut self) {
        let _ = sandbox::send_signal(self.0, "KILL");
    }
}
