//! TLS on both sides: clients upgrade to TLS at Sluice (verified against the CA that
//! signed Sluice's certificate), and Sluice upgrades its backend connections when the
//! server entry says so. Session status seen through Sluice is the backend session's,
//! so the client side is checked with the CLI's own `status` report instead.

use crate::support::{
    dedicated_server, sandbox, shared_server, CliOutput, Client, Config, MariaDbOptions, Sluice,
    TlsFiles,
};

fn tls_args(tls: &TlsFiles) -> Vec<String> {
    vec![
        "--ssl".to_owned(),
        "--ssl-verify-server-cert".to_owned(),
        format!("--ssl-ca={}", tls.ca_cert.display()),
    ]
}

/// The CLI's `status` line about TLS: "Cipher in use is ..." or "Not in use".
fn ssl_status(client: Client) -> String {
    let out = client.arg("--execute=status").run();
    out.assert_success();
    out.stdout
        .lines()
        .find(|line| line.starts_with("SSL:"))
        .unwrap_or_else(|| panic!("no SSL line in status output:\n{}", out.stdout))
        .to_owned()
}

#[test]
fn clients_upgrade_to_tls_and_verify_sluice() {
    let certs = tempfile::tempdir().unwrap();
    let tls = sandbox::generate_tls(certs.path()).unwrap();
    let server = shared_server();
    let sluice = Sluice::start(&Config::for_server(server).listener_tls(&tls, false));

    let status = ssl_status(Client::native(sluice.port()).args(tls_args(&tls)));
    assert!(status.contains("Cipher in use is"), "{status}");
    // Several times: clients send their TLS ClientHello right behind the SSL request
    // without waiting, and whether both arrive in one read is down to timing.
    for attempt in 1..=10 {
        let out = Client::native(sluice.port())
            .args(tls_args(&tls))
            .query("SELECT 'over tls'");
        assert!(
            out.success(),
            "attempt {attempt}: {}\nlog:\n{}",
            out.stderr,
            sluice.log()
        );
        assert_eq!(out.stdout, "over tls\nover tls\n", "attempt {attempt}");
    }

    // TLS is offered, not required: plain clients still get in.
    let status = ssl_status(Client::native(sluice.port()).arg("--skip-ssl"));
    assert!(status.contains("Not in use"), "{status}");

    // A client trusting another CA must refuse Sluice's certificate.
    let other = tempfile::tempdir().unwrap();
    let other = sandbox::generate_tls(other.path()).unwrap();
    let refused = Client::native(sluice.port())
        .args(tls_args(&other))
        .query("SELECT 1");
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(refused.stderr.contains("ERROR 2026"), "{}", refused.stderr);
}

#[test]
fn require_tls_refuses_plain_clients() {
    let certs = tempfile::tempdir().unwrap();
    let tls = sandbox::generate_tls(certs.path()).unwrap();
    let server = shared_server();
    let mut sluice = Sluice::start(&Config::for_server(server).listener_tls(&tls, true));

    let plain = Client::native(sluice.port())
        .arg("--skip-ssl")
        .query("SELECT 1");
    assert_ne!(plain.code, Some(0), "a plain client got in: {plain:?}");
    assert!(plain.stderr.starts_with("ERROR "), "{}", plain.stderr);
    assert!(plain.stdout.is_empty());

    let secure = Client::native(sluice.port())
        .args(tls_args(&tls))
        .query_ok("SELECT 2");
    assert_eq!(secure, "2\n");
    sluice.assert_running();
}

#[test]
fn backend_connections_use_tls_when_required() {
    let backend = dedicated_server(MariaDbOptions {
        tls: true,
        ..MariaDbOptions::default()
    });
    let tls = backend.tls().unwrap().clone();
    let mut config = Config::for_server(&backend);
    config.servers[0].tls = Some("required".to_owned());
    config.servers[0].tls_ca = Some(tls.ca_cert.clone());
    config.servers[0].tls_verify = Some(true);
    let sluice = Sluice::start(&config);

    // The client side is plain; what the backend reports is Sluice's own session.
    let out = Client::native(sluice.port())
        .arg("--skip-ssl")
        .query_ok("SHOW SESSION STATUS LIKE 'Ssl_version'");
    assert!(
        out.starts_with("Ssl_version\tTLSv1."),
        "backend session not on TLS: {out}"
    );

    // Control: the same backend without TLS in the server entry reports no TLS.
    let plain = Sluice::start(&Config::for_server(&backend));
    let out = Client::native(plain.port())
        .arg("--skip-ssl")
        .query_ok("SHOW SESSION STATUS LIKE 'Ssl_version'");
    assert_eq!(out, "Ssl_version\t\n");
}

/// Starts a Sluice with `config` and runs `SELECT 1` through it with a plain client.
fn select_through(config: &Config) -> (Sluice, CliOutput) {
    let sluice = Sluice::start(config);
    let out = Client::native(sluice.port())
        .arg("--skip-ssl")
        .query("SELECT 1");
    (sluice, out)
}

#[test]
fn backend_tls_verification_failures_reach_the_client() {
    let backend = dedicated_server(MariaDbOptions {
        tls: true,
        ..MariaDbOptions::default()
    });
    let other = tempfile::tempdir().unwrap();
    let other = sandbox::generate_tls(other.path()).unwrap();
    let mut config = Config::for_server(&backend);
    config.servers[0].tls = Some("required".to_owned());
    config.servers[0].tls_ca = Some(other.ca_cert.clone());
    config.servers[0].tls_verify = Some(true);
    let (mut sluice, out) = select_through(&config);
    assert_ne!(
        out.code,
        Some(0),
        "an unverifiable backend was used: {out:?}"
    );
    assert!(out.stderr.starts_with("ERROR "), "{}", out.stderr);
    sluice.assert_running();

    // "required" against a server without TLS must fail too, not fall back to plain.
    let mut config = Config::for_server(shared_server());
    config.servers[0].tls = Some("required".to_owned());
    let (mut sluice, out) = select_through(&config);
    assert_ne!(
        out.code,
        Some(0),
        "TLS required but a plain backend was used: {out:?}"
    );
    sluice.assert_running();
}
