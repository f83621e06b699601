//! The admin HTTP JSON API (loopback, bearer token); the `sluice admin` command that
//! wraps it lives with the binary. Subsystems plug in through traits such as
//! [`CacheAdmin`], so this module depends on none of them.

pub mod config;
pub mod dashboard;
pub mod metrics;

pub use config::AdminConfig;

use crate::secret::Secret;
use crate::shutdown::Shutdown;
use crate::stats::Stats;
use anyhow::Context;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Largest request body accepted; rule sets are small, anything bigger is a mistake.
pub const MAX_BODY: usize = 1 << 20;

/// After shutdown, how long requests already running (a warm-up, say) may take.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the admin API needs from the query cache. Implemented by the cache; JSON in and
/// out so the HTTP layer stays thin.
pub trait CacheAdmin: Send + Sync + 'static {
    /// Everything about the cache: totals, per rule, per digest, binlog reader state.
    fn stats(&self) -> Value;
    /// Current rules, as JSON objects with the same fields as the config's [[cache.rules]].
    fn rules(&self) -> Value;
    /// Replaces the rules at runtime. Err: every problem found (nothing changed then).
    fn set_rules(&self, rules: Value) -> Result<(), Vec<String>>;
    /// Drops entries; returns how many.
    fn invalidate(&self, what: Invalidate) -> Result<u64, String>;
    /// Pre-populates the cache from a file of queries (path on the Sluice host; None = the
    /// configured file). Returns a JSON report.
    fn warm(&self, file: Option<PathBuf>) -> WarmFuture;
}

/// What the admin API shows of client sessions and the backend pools.
pub trait SessionsAdmin: Send + Sync + 'static {
    /// One object per client session: id, user, client address, state, pin and backend.
    fn sessions(&self) -> Value;
    /// Totals: sessions, backend connections per server, the multiplexing ratio, pins by
    /// reason, queue length and waits.
    fn pool(&self) -> Value;
}

/// What the admin API needs from routing: servers with their role, health and lag,
/// and the operator's actions on them.
pub trait ServersAdmin: Send + Sync + 'static {
    /// The writer, every server's state, and the routing counters.
    fn servers(&self) -> Value;
    /// Moves the writer (to the server named, or the most advanced replica) without
    /// losing writes. Ok: a JSON report.
    fn switchover(&self, to: Option<String>) -> WarmFuture;
    /// Takes a server out of routing (`enabled: false`) or puts it back, which also
    /// clears a failover's fence.
    fn set_enabled(&self, server: &str, enabled: bool) -> Result<Value, String>;
    /// Stops routing new work to a server; what it is running finishes, then its
    /// connections close. `enable` ends a drain. Err: (status, message).
    fn drain(&self, server: &str) -> Result<Value, (StatusCode, String)>;
}

/// What the admin API shows of the other Sluice instances in front of the same servers.
pub trait FleetAdmin: Send + Sync + 'static {
    /// This instance's slot and mode, and every instance with its address, version,
    /// configuration hash, sessions, duties and last contact.
    fn fleet(&self) -> Value;
}

/// What the admin API shows of analytics: overview, history, digests, users, the cache
/// advisor, and the Prometheus exposition.
pub trait AnalyticsAdmin: Send + Sync + 'static {
    fn overview(&self) -> Value;
    /// Per-second points (`minutes` false) or per-minute points newer than `since`.
    fn history(&self, minutes: bool, since: Option<u64>) -> Value;
    fn digests(&self, sort: crate::analytics::digests::Sort, limit: usize) -> Value;
    /// One digest by its 16-hex-digit id.
    fn digest(&self, id: &str) -> Option<Value>;
    /// Forgets every digest; returns how many there were.
    fn reset_digests(&self) -> usize;
    fn users(&self) -> Value;
    fn advisor(&self, limit: usize) -> Value;
    /// Adds a cache rule for the digest. Err: (status, message).
    fn enable_advice(&self, id: &str, ttl: Duration) -> Result<Value, (StatusCode, String)>;
    /// The Prometheus text exposition.
    fn metrics(&self) -> String;
}

/// Reads the configuration file again and applies it, as SIGHUP does. Ok: a JSON report;
/// Err: every problem (nothing changed then).
pub type Reload = Arc<dyn Fn() -> Result<Value, Vec<String>> + Send + Sync>;

/// What [`CacheAdmin::warm`] returns: the warm-up runs on its own task, so it must be
/// `Send + 'static`.
pub type WarmFuture = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// Which cache entries to drop.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Invalidate {
    All,
    /// Entries stored under the rule of this name.
    Rule(String),
    /// Entries whose results read this table.
    Table {
        schema: String,
        table: String,
    },
    /// Entries of one statement digest: its hex hash or its normalized text.
    Digest(String),
}

/// Handles the admin server serves; a field per subsystem so later ones (servers,
/// sessions...) can be added.
#[derive(Clone)]
pub struct AdminState {
    /// `None` when no cache is configured: its endpoints then answer 404.
    pub cache: Option<Arc<dyn CacheAdmin>>,
    pub sessions: Option<Arc<dyn SessionsAdmin>>,
    pub servers: Option<Arc<dyn ServersAdmin>>,
    pub analytics: Option<Arc<dyn AnalyticsAdmin>>,
    /// `None` when the instance is in no fleet (`[fleet] enabled = false`, or no
    /// account to reach the servers): `/v1/fleet` answers 404.
    pub fleet: Option<Arc<dyn FleetAdmin>>,
    pub reload: Option<Reload>,
    /// Starts a successor and waits for its take-over: what it answered, or why not.
    pub upgrade: Option<Reload>,
    pub stats: Arc<Stats>,
}

/// Binds the admin listener on `cfg.address`. Separate from [`serve`] so the caller
/// learns the bound address (and a bind failure) before anything runs.
pub async fn bind(cfg: &AdminConfig) -> anyhow::Result<TcpListener> {
    let address: SocketAddr = cfg
        .address
        .parse()
        .with_context(|| format!("admin.address {:?} is not IP:port", cfg.address))?;
    TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address} for the admin API"))
}

/// Serves the admin API on `listener` until `shutdown` (or a hand-over); then requests
/// already running get a few seconds to finish.
pub async fn serve(
    listener: TcpListener,
    token: Secret,
    state: AdminState,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "admin API listening");
    }
    let mut graceful = shutdown.clone();
    // After a hand-over the successor answers on the same socket: this one stops
    // accepting then, and finishes what it was asked (an upgrade's own answer).
    let server = axum::serve(listener, router(&token, state))
        .with_graceful_shutdown(async move { graceful.stopping_or_moving(false).await });
    let mut deadline = shutdown;
    tokio::select! {
        result = server => result.context("admin API server"),
        _ = async {
            deadline.stopping().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::debug!("admin requests still running at shutdown were dropped");
            Ok(())
        }
    }
}

/// Everything a caller usually wants in one call: resolves the token (none: the API is
/// off and `Ok(None)` is returned), binds, and spawns [`serve`] on the current runtime.
/// Returns the bound address and the server task.
/// `inherited`: the listening socket a previous process handed over, used rather than
/// binding. With the address, the server task and a copy of the listening socket (for
/// the next hand-over).
pub async fn start(
    cfg: &AdminConfig,
    state: AdminState,
    shutdown: Shutdown,
    inherited: Option<std::os::fd::OwnedFd>,
) -> anyhow::Result<Option<Started>> {
    let Some(token) = cfg.resolved_token().map_err(anyhow::Error::msg)? else {
        tracing::info!("no admin token configured: admin API off");
        return Ok(None);
    };
    let listener = match inherited {
        Some(socket) => {
            let std = std::net::TcpListener::from(socket);
            std.set_nonblocking(true)?;
            TcpListener::from_std(std)?
        }
        None => bind(cfg).await?,
    };
    let address = listener.local_addr()?;
    let socket = std::os::fd::AsFd::as_fd(&listener).try_clone_to_owned()?;
    let task = tokio::spawn(async move {
        if let Err(e) = serve(listener, token, state, shutdown).await {
            tracing::error!("admin API stopped: {e:#}");
        }
    });
    Ok(Some(Started {
        address,
        task,
        socket,
    }))
}

/// The admin API, started.
pub struct Started {
    pub address: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    /// A copy of its listening socket.
    pub socket: std::os::fd::OwnedFd,
}

/// The routes, with authentication, the body limit and request logging. The dashboard's
/// page and scripts are public (they hold no data; the page asks for the token), every
/// other path needs the token.
pub fn router(token: &Secret, state: AdminState) -> Router {
    let key = Arc::new(TokenKey::new(token));
    let guarded = Router::new()
        .route("/v1/stats", get(process_stats))
        .route("/v1/overview", get(overview))
        .route("/v1/history", get(history))
        .route("/v1/digests", get(digests))
        .route("/v1/digests/reset", post(reset_digests))
        .route("/v1/digests/{id}", get(digest))
        .route("/v1/users", get(users))
        .route("/v1/advisor", get(advisor))
        .route("/v1/advisor/enable", post(enable_advice))
        .route("/v1/config/reload", post(reload))
        .route("/v1/upgrade", post(upgrade))
        .route("/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/v1/servers/{name}/drain", post(drain_server))
        .route("/v1/cache/stats", get(cache_stats))
        .route("/v1/cache/rules", get(get_rules).put(put_rules))
        .route("/v1/cache/invalidate", post(invalidate))
        .route("/v1/cache/warm", post(warm))
        .route("/v1/sessions", get(sessions))
        .route("/v1/pool", get(pool))
        .route("/v1/servers", get(servers))
        .route("/v1/fleet", get(fleet))
        .route("/v1/servers/switchover", post(switchover))
        .route("/v1/servers/{name}/enable", post(enable_server))
        .route("/v1/servers/{name}/disable", post(disable_server))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(refuse_announced_large_bodies))
        // Outside the routes so that unknown paths, too, answer 401 to strangers.
        .layer(middleware::from_fn_with_state(key, authenticate));
    Router::new()
        .route("/", get(dashboard::redirect))
        .route("/dashboard", get(dashboard::page))
        .route("/dashboard/", get(dashboard::redirect))
        .route("/dashboard/app.js", get(dashboard::script))
        .route("/dashboard/style.css", get(dashboard::style))
        .merge(guarded)
        .layer(middleware::from_fn(log_request))
        .with_state(Arc::new(state))
}

/// The OpenAPI document of this API, served as it is built in.
pub const OPENAPI: &str = include_str!("admin/openapi.json");

type Shared = Arc<AdminState>;

/// An error answer: its status and a JSON object with at least `"error"`.
struct ApiError(StatusCode, Value);

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError(status, json!({ "error": message.into() }))
    }
    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

/// The token is kept only as a hash: comparing fixed-size digests in constant time leaks
/// neither the content nor the length of the token.
struct TokenKey([u8; 32]);

impl TokenKey {
    fn new(token: &Secret) -> TokenKey {
        TokenKey(Sha256::digest(token.0.as_bytes()).into())
    }

    fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest
            .iter()
            .zip(self.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

async fn authenticate(State(key): State<Arc<TokenKey>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer(v.as_bytes()));
    match presented {
        Some(token) if key.matches(token) => next.run(request).await,
        Some(_) => ApiError::new(StatusCode::UNAUTHORIZED, "wrong admin token").into_response(),
        None => {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing admin token: send \"Authorization: Bearer TOKEN\"",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
            response
        }
    }
}

/// A body announced larger than the limit is refused before any of it is read.
async fn refuse_announced_large_bodies(request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large().into_response();
    }
    next.run(request).await
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body is larger than {MAX_BODY} bytes"),
    )
}

/// The token of an `Authorization: Bearer TOKEN` value (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// Logs method, path and status; never headers (the token) nor the query string.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::debug!(
        %method,
        path,
        status = response.status().as_u16(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "admin request"
    );
    response
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint",
    )
}

fn cache(state: &AdminState) -> Result<&Arc<dyn CacheAdmin>, ApiError> {
    state
        .cache
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no cache is configured"))
}

/// The body as JSON; an empty body reads as `empty` (for endpoints whose body is optional).
fn json_body(body: Result<Bytes, BytesRejection>, empty: Option<Value>) -> Result<Value, ApiError> {
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(status, rejection.body_text())
        }
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        if let Some(value) = empty {
            return Ok(value);
        }
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))
}

async fn process_stats(State(state): State<Shared>) -> Json<Value> {
    let counters: serde_json::Map<String, Value> = state
        .stats
        .snapshot()
        .into_iter()
        .map(|(name, _, value)| (name.to_owned(), Value::from(value)))
        .collect();
    Json(Value::Object(counters))
}

fn sessions_admin(state: &AdminState) -> Result<&Arc<dyn SessionsAdmin>, ApiError> {
    state
        .sessions
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no sessions here"))
}

async fn sessions(State(state): State<Shared>) -> ApiResult {
    Ok(Json(sessions_admin(&state)?.sessions()))
}

async fn pool(State(state): State<Shared>) -> ApiResult {
    Ok(Json(sessions_admin(&state)?.pool()))
}

async fn cache_stats(State(state): State<Shared>) -> ApiResult {
    Ok(Json(cache(&state)?.stats()))
}

async fn get_rules(State(state): State<Shared>) -> ApiResult {
    Ok(Json(cache(&state)?.rules()))
}

async fn put_rules(State(state): State<Shared>, body: Result<Bytes, BytesRejection>) -> ApiResult {
    let cache = cache(&state)?;
    let rules = json_body(body, None)?;
    let Some(count) = rules.as_array().map(Vec::len) else {
        return Err(ApiError::bad_request(
            "the body must be a JSON array of rules",
        ));
    };
    match cache.set_rules(rules) {
        Ok(()) => Ok(Json(json!({ "rules": count }))),
        Err(errors) => Err(ApiError(
            StatusCode::BAD_REQUEST,
            json!({
                "error": format!("rules refused ({} problem(s)); nothing changed", errors.len()),
                "errors": errors,
            }),
        )),
    }
}

async fn invalidate(State(state): State<Shared>, body: Result<Bytes, BytesRejection>) -> ApiResult {
    let cache = cache(&state)?;
    let what = parse_invalidate(&json_body(body, None)?).map_err(ApiError::bad_request)?;
    match cache.invalidate(what) {
        Ok(n) => Ok(Json(json!({ "invalidated": n }))),
        Err(e) => Err(ApiError::bad_request(e)),
    }
}

/// `{"all":true}`, `{"rule":"name"}`, `{"table":"schema.table"}` or `{"digest":"..."}`.
fn parse_invalidate(body: &Value) -> Result<Invalidate, String> {
    const EXPECTED: &str = r#"expected one of {"all":true}, {"rule":"NAME"}, {"table":"SCHEMA.TABLE"}, {"digest":"HASH or TEXT"}"#;
    let Some(object) = body.as_object() else {
        return Err(EXPECTED.into());
    };
    let mut entries = object.iter();
    let (Some((key, value)), None) = (entries.next(), entries.next()) else {
        return Err(EXPECTED.into());
    };
    let text = || match value.as_str() {
        Some(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        _ => Err(format!("{key}: expected a non-empty string")),
    };
    match key.as_str() {
        "all" if value == &Value::Bool(true) => Ok(Invalidate::All),
        "all" => Err("all: expected true".into()),
        "rule" => Ok(Invalidate::Rule(text()?)),
        "digest" => Ok(Invalidate::Digest(text()?)),
        "table" => {
            let qualified = text()?;
            let unquote = |s: &str| s.trim().trim_matches('`').to_owned();
            match qualified.split_once('.') {
                Some((schema, table))
                    if !unquote(schema).is_empty() && !unquote(table).is_empty() =>
                {
                    Ok(Invalidate::Table {
                        schema: unquote(schema),
                        table: unquote(table),
                    })
                }
                _ => Err(format!("table: expected SCHEMA.TABLE, got {qualified:?}")),
            }
        }
        _ => Err(EXPECTED.into()),
    }
}

async fn warm(State(state): State<Shared>, body: Result<Bytes, BytesRejection>) -> ApiResult {
    let cache = cache(&state)?.clone();
    let body = json_body(body, Some(json!({})))?;
    let file = match body.as_object().map(|o| (o.get("file"), o.len())) {
        Some((None, 0)) => None,
        Some((Some(Value::String(f)), 1)) => {
            let path = PathBuf::from(f);
            // Relative to what? The server's working directory is nobody's business.
            if !path.is_absolute() {
                return Err(ApiError::bad_request(
                    "file must be an absolute path on the Sluice host",
                ));
            }
            Some(path)
        }
        _ => {
            return Err(ApiError::bad_request(
                r#"expected {} or {"file":"/absolute/path"}"#,
            ))
        }
    };
    // On its own task so that a client hanging up does not abandon a half-done warm-up.
    match tokio::spawn(cache.warm(file)).await {
        Ok(Ok(report)) => Ok(Json(report)),
        Ok(Err(e)) => Err(ApiError::bad_request(e)),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("warm-up failed: {e}"),
        )),
    }
}

fn servers_admin(state: &AdminState) -> Result<&Arc<dyn ServersAdmin>, ApiError> {
    state
        .servers
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no servers here"))
}

async fn servers(State(state): State<Shared>) -> ApiResult {
    Ok(Json(servers_admin(&state)?.servers()))
}

async fn fleet(State(state): State<Shared>) -> ApiResult {
    let fleet = state.fleet.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "this instance is in no fleet ([fleet] enabled = false, or no monitor account)",
        )
    })?;
    Ok(Json(fleet.fleet()))
}

/// `{"to": "name"}` or an empty body (the most advanced replica).
async fn switchover(State(state): State<Shared>, body: Result<Bytes, BytesRejection>) -> ApiResult {
    let servers = servers_admin(&state)?.clone();
    let body = json_body(body, Some(json!({})))?;
    let to = match body.get("to") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::bad_request("\"to\" must be a server name")),
    };
    servers
        .switchover(to)
        .await
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::CONFLICT, e))
}

async fn enable_server(
    State(state): State<Shared>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> ApiResult {
    servers_admin(&state)?
        .set_enabled(&name, true)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, e))
}

async fn disable_server(
    State(state): State<Shared>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> ApiResult {
    servers_admin(&state)?
        .set_enabled(&name, false)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, e))
}

fn analytics(state: &AdminState) -> Result<&Arc<dyn AnalyticsAdmin>, ApiError> {
    state
        .analytics
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no analytics here"))
}

type Query = axum::extract::Query<std::collections::HashMap<String, String>>;

/// A query parameter parsed, with a 400 that names it when it does not parse.
fn param<T: std::str::FromStr>(q: &Query, name: &str) -> Result<Option<T>, ApiError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("{name}: {v:?} is not valid"))),
    }
}

fn limit(q: &Query, default: usize) -> Result<usize, ApiError> {
    match param::<usize>(q, "limit")? {
        Some(0) => Err(ApiError::bad_request("limit: must be at least 1")),
        Some(n) => Ok(n.min(10_000)),
        None => Ok(default),
    }
}

async fn overview(State(state): State<Shared>) -> ApiResult {
    Ok(Json(analytics(&state)?.overview()))
}

async fn history(State(state): State<Shared>, q: Query) -> ApiResult {
    let a = analytics(&state)?;
    let minutes = match q.get("range").map(String::as_str) {
        None | Some("hour") => false,
        Some("day") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "range: {other:?} is not hour or day"
            )))
        }
    };
    Ok(Json(a.history(minutes, param(&q, "since")?)))
}

async fn digests(State(state): State<Shared>, q: Query) -> ApiResult {
    let a = analytics(&state)?;
    use crate::analytics::digests::Sort;
    let sort = match q.get("sort") {
        None => Sort::TotalTime,
        Some(s) => Sort::parse(s).ok_or_else(|| {
            let names: Vec<&str> = Sort::NAMES.iter().map(|(name, _)| *name).collect();
            ApiError::bad_request(format!("sort: {s:?} is not one of {}", names.join(", ")))
        })?,
    };
    Ok(Json(a.digests(sort, limit(&q, 100)?)))
}

async fn digest(
    State(state): State<Shared>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> ApiResult {
    analytics(&state)?
        .digest(&id)
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no digest {id:?}")))
}

async fn reset_digests(State(state): State<Shared>) -> ApiResult {
    Ok(Json(json!({ "reset": analytics(&state)?.reset_digests() })))
}

async fn users(State(state): State<Shared>) -> ApiResult {
    Ok(Json(analytics(&state)?.users()))
}

async fn advisor(State(state): State<Shared>, q: Query) -> ApiResult {
    let a = analytics(&state)?;
    Ok(Json(a.advisor(limit(&q, 20)?)))
}

/// `{"digest": "ID", "ttl": "5m"}` (ttl optional).
async fn enable_advice(
    State(state): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let a = analytics(&state)?;
    let body = json_body(body, None)?;
    let Some(id) = body.get("digest").and_then(Value::as_str) else {
        return Err(ApiError::bad_request(
            r#"expected {"digest": "ID"} and optionally "ttl": "5m""#,
        ));
    };
    let ttl = match body.get("ttl") {
        None | Some(Value::Null) => Duration::from_secs(300),
        Some(Value::String(s)) => humantime::parse_duration(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| ApiError::bad_request(format!("ttl: {s:?} is not a duration")))?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "ttl: expected a string such as \"5m\"",
            ))
        }
    };
    a.enable_advice(id, ttl)
        .map(Json)
        .map_err(|(status, e)| ApiError::new(status, e))
}

async fn reload(State(state): State<Shared>) -> ApiResult {
    let Some(reload) = state.reload.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "Sluice was started without a configuration file: nothing to reload",
        ));
    };
    match tokio::task::spawn_blocking(move || reload()).await {
        Ok(Ok(report)) => Ok(Json(report)),
        Ok(Err(errors)) => Err(ApiError(
            StatusCode::CONFLICT,
            json!({
                "error": format!("reload refused ({} problem(s)); nothing changed", errors.len()),
                "errors": errors,
            }),
        )),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reload failed: {e}"),
        )),
    }
}

async fn upgrade(State(state): State<Shared>) -> ApiResult {
    let Some(upgrade) = state.upgrade.clone() else {
        let why = "no [handover] socket configured: no successor can take over";
        return Err(ApiError(
            StatusCode::CONFLICT,
            json!({ "error": why, "errors": [why] }),
        ));
    };
    match tokio::task::spawn_blocking(move || upgrade()).await {
        Ok(Ok(report)) => Ok(Json(report)),
        Ok(Err(errors)) => Err(ApiError(
            StatusCode::CONFLICT,
            json!({
                "error": "the new process did not take over; this one goes on serving everything",
                "errors": errors,
            }),
        )),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("upgrade failed: {e}"),
        )),
    }
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics(State(state): State<Shared>) -> Result<Response, ApiError> {
    let text = match &state.analytics {
        Some(a) => a.metrics(),
        None => metrics::render_counters(&state.stats),
    };
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn drain_server(
    State(state): State<Shared>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> ApiResult {
    servers_admin(&state)?
        .drain(&name)
        .map(Json)
        .map_err(|(status, e)| ApiError::new(status, e))
}

#[cfg(test)]
mod tests;
