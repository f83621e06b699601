//! The `sluice` command: `serve`, `upgrade`, `check-config`, `admin` and `bench` (`cache`, `mux`,
//! `routing`, `galera`, `shard`, `all`), on the proxy library and the benchmark crate.

mod admin;

use anyhow::Context;
use clap::{Parser, Subcommand};
use sluice::config::{Config, LogFormat, Overrides};
use sluice::log_context::{TaggedFields, TaggedJson};
use std::path::PathBuf;
use std::process::ExitCode;
use tracing_subscriber::fmt::format::DefaultFields;

/// Sluice: a transparent traffic manager for MySQL and MariaDB.
///
/// Point your application at Sluice instead of the database: it speaks the MySQL
/// protocol on both sides and needs no change to the application or the server.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    ///
    /// With --config, settings come from the TOML file; --listen, --backend and --user
    /// replace the file's lists when given. Without a file, the flags alone are enough:
    ///   sluice serve --listen 127.0.0.1:6033 --backend 127.0.0.1:3306 --user app:secret
    /// SIGTERM/SIGINT stop accepting clients and let running statements finish (up to
    /// limits.shutdown_grace); SIGHUP reloads users and servers from the file.
    Serve(ServeArgs),
    /// Restart the Sluice running with this configuration without a client noticing: it
    /// starts a new process (its binary as it is on disk now, with its arguments), which
    /// takes the listening sockets and the sessions over; this waits until it did.
    ///
    /// Needs `[handover] socket`; talks to the running process there (no admin token).
    /// What `systemctl reload sluice` runs. Exit status 1 when the new process did not
    /// take over (the running one goes on serving everything), 2 when no Sluice runs there.
    Upgrade {
        /// The running Sluice's TOML configuration file.
        #[arg(short, long, env = "SLUICE_CONFIG")]
        config: PathBuf,
    },
    /// Validate a configuration file and report every problem at once.
    CheckConfig {
        /// The TOML configuration file.
        file: PathBuf,
    },
    /// Talk to a running Sluice's admin API (stats, query cache).
    ///
    /// The token comes from --token, else --config's [admin] section, else the
    /// SLUICE_ADMIN_TOKEN environment variable. Exit status 1 when the server refuses the
    /// request, 2 when it cannot be reached.
    Admin(Box<admin::AdminArgs>),
    /// Benchmarks: `sluice bench
    /// cache|mux|routing|galera|shard|zones|failover|fleet|upgrade|all` (no scenario:
    /// `cache`).
    ///
    /// Each scenario runs sysbench (and mysqlslap) straight at MariaDB and through Sluice
    /// in the same run, and writes the results as Markdown, CSV, JSON and HTML with
    /// charts. Without a scenario, the flags are the cache scenario's.
    Bench(Box<sluice_bench::BenchArgs>),
    /// Old name of `sluice bench mux`.
    #[command(hide = true)]
    BenchMux(Box<sluice_bench::mux::MuxArgs>),
    /// Old name of `sluice bench routing`.
    #[command(hide = true)]
    BenchRouting(Box<sluice_bench::routing::RoutingArgs>),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see docs/CONFIGURATION.md).
    #[arg(short, long, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to accept clients on, e.g. 127.0.0.1:6033, or a Unix socket path starting
    /// with / (repeatable).
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// Backend server host:port, or its Unix socket path starting with / (repeatable).
    #[arg(long, value_name = "ADDR")]
    backend: Vec<String>,
    /// A user as NAME:PASSWORD, used both to log in to Sluice and to the backend (repeatable).
    #[arg(long, value_name = "NAME:PASSWORD")]
    user: Vec<String>,
    /// Log format.
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
    /// Log filter, e.g. "info" or "sluice=debug".
    #[arg(long)]
    log_level: Option<String>,
    /// Take the listening sockets of the Sluice running on `[handover] socket`, then let
    /// it stop: no client connection is refused during the restart. Without a running
    /// Sluice there, this one does not start.
    #[arg(long)]
    take_over: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => check_config(&file),
        Command::Upgrade { config } => upgrade(&config),
        Command::Serve(args) => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Admin(args) => admin::run(*args),
        Command::Bench(args) => report("sluice bench", sluice_bench::run(*args)),
        Command::BenchMux(args) => report(
            "sluice bench mux",
            sluice_bench::run_renamed("bench-mux", sluice_bench::Scenario::Mux(args)),
        ),
        Command::BenchRouting(args) => report(
            "sluice bench routing",
            sluice_bench::run_renamed("bench-routing", sluice_bench::Scenario::Routing(args)),
        ),
    }
}

/// The exit status of a command that ran to the end or failed, its error printed.
fn report(command: &str, outcome: anyhow::Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{command}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn upgrade(file: &std::path::Path) -> ExitCode {
    let config = match Config::load(file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice upgrade: {e:#}");
            return ExitCode::from(2);
        }
    };
    let Some(socket) = &config.handover.socket else {
        eprintln!(
            "sluice upgrade: {} sets no [handover] socket: the running Sluice cannot hand over",
            file.display()
        );
        return ExitCode::from(2);
    };
    // The new process starts (servers, pools) before the hand-over's own bound runs.
    let timeout = config.handover.ready_timeout + std::time::Duration::from_secs(60);
    match sluice::server::handover::ask_upgrade(socket, timeout) {
        Ok(answer) if answer["upgraded"] == true => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprintln!("sluice upgrade: {answer}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sluice upgrade: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn check_config(file: &std::path::Path) -> ExitCode {
    let config = match Config::load(file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    let problems = config.validate();
    if problems.is_empty() {
        println!("{}: OK", file.display());
        ExitCode::SUCCESS
    } else {
        eprintln!("{}: {} problem(s):", file.display(), problems.len());
        for p in problems {
            eprintln!("  - {p}");
        }
        ExitCode::FAILURE
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let overrides = Overrides {
        listen: args.listen,
        backends: args.backend,
        users: args.user,
        log_format: args.log_format,
        log_level: args.log_level,
        take_over: args.take_over,
    };
    let mut problems = config.apply(&overrides).err().unwrap_or_default();
    problems.extend(config.validate());
    if !problems.is_empty() {
        anyhow::bail!("invalid configuration:\n  - {}", problems.join("\n  - "));
    }
    init_logging(&config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(sluice::server::run(config, args.config, overrides))?;
    // Sessions still running past the grace period are dropped with the runtime.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(())
}

fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    // A session's lines name it (`log_context`): after their fields in text, as a
    // member of their own in JSON.
    match config.log.format {
        LogFormat::Json => builder
            .json()
            .event_format(TaggedJson(tracing_subscriber::fmt::format().json()))
            .init(),
        LogFormat::Text => builder
            .fmt_fields(TaggedFields(DefaultFields::new()))
            .init(),
    }
}
