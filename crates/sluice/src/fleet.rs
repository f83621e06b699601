//! Many Sluice instances in front of the same servers acting as one proxy, coordinated
//! through an engine every deployment already has: etcd when `[fleet] etcd` names one
//! (`etcd`), else the servers themselves (`servers`). Each instance holds a slot, the
//! top byte of its session ids, so that ids are unique across the fleet and a KILL
//! names the instance whose session it is; runtime changes made through one instance's
//! admin API reach the others as [`Change`]s; requests that only the holder of a session
//! can carry out go to it as a [`Request`] and come back as a [`Reply`].
//! Exactly one instance changes the writer at a time: the writer lock on the servers
//! (`monitor::writer_lock`), and with etcd the `writer` duty too.

pub mod config;
mod etcd;
mod message;
mod servers;

pub use config::FleetConfig;
pub use message::{Change, KillTarget, Message, Reply, Request, ServerState};

use message::{Read, Reason, Rejections, Seal};

use crate::admin::metrics::Family;
use crate::auth::BackendCredentials;
use crate::router::Router;
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;

/// Slots, one per instance: a session id's top byte.
pub const SLOTS: u32 = 256;
const SLOT_SHIFT: u32 = 24;
/// The session-id bits an instance numbers its own sessions with.
pub const LOCAL_ID_MASK: u32 = (1 << SLOT_SHIFT) - 1;
const NO_SLOT: u32 = u32::MAX;
/// How often an instance's row is written when nothing in it changed but its count of
/// sessions.
const REGISTER_EVERY: Duration = Duration::from_secs(30);
const INSTANCES: Family = Family::gauge(
    "sluice_fleet_instances",
    "Sluice instances in front of the same servers, by state (live: holds its slot)",
);
const SLOT: Family = Family::gauge(
    "sluice_fleet_slot",
    "this instance's slot (the top byte of its session ids); -1 before it holds one",
);
const LEADER: Family = Family::gauge(
    "sluice_fleet_leader",
    "1 while this instance holds the fleet's leader duty",
);
const APPLIED: Family = Family::counter(
    "sluice_fleet_changes_applied_total",
    "runtime changes made through other instances and applied here",
);
const REJECTED: Family = Family::counter(
    "sluice_fleet_messages_rejected_total",
    "messages and shared state entries from the fleet dropped unread, by reason \
     (unsigned, bad_signature, stale)",
);
/// How long a change is offered again to an engine that refuses it: longer than a
/// failover takes to name a new writer for the fleet's tables.
const RESEND_FOR: Duration = Duration::from_secs(30);

/// The instance a session id belongs to.
pub fn slot_of(id: u32) -> u32 {
    id >> SLOT_SHIFT
}

/// The current router (a reload replaces it).
pub type RouterSource = Arc<dyn Fn() -> Arc<Router> + Send + Sync>;

/// What peers see of an instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberInfo {
    pub slot: u32,
    pub name: String,
    /// Where clients connect to it.
    pub address: String,
    pub version: String,
    /// A hash of its effective configuration: instances that differ are drifting.
    pub config_hash: String,
    /// The instance name its cross-shard transactions carry (`[sharding] instance`).
    pub xa_instance: String,
    pub sessions: u64,
    pub duties: Vec<String>,
    /// Unix time (ms) it started.
    pub started_ms: u64,
    /// How long ago (ms) the engine last heard of it, as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_contact_ms: Option<u64>,
    /// Whether it holds its slot now.
    #[serde(default)]
    pub live: bool,
}

/// What the fleet asks of this instance.
pub trait Local: Send + Sync + 'static {
    /// A change another instance made: apply it here, without telling the fleet again.
    /// `live`: just made (not an entry of the shared state read at start).
    fn apply(&self, change: &Change, live: bool);
    /// A request for sessions held here.
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Reply> + Send>>;
    fn sessions(&self) -> u64;
}

// One per process, made once: the size of either does not matter.
#[allow(clippy::large_enum_variant)]
enum Engine {
    Servers(servers::Servers),
    Etcd(etcd::Etcd),
}

/// This instance's membership of the fleet.
pub struct Fleet {
    config: FleetConfig,
    engine: Engine,
    me: Mutex<MemberInfo>,
    slot: AtomicU32,
    members: ArcSwap<Vec<MemberInfo>>,
    /// The writer the fleet last named.
    named_writer: Mutex<Option<String>>,
    outbox: mpsc::UnboundedSender<Message>,
    outbox_rx: Mutex<Option<mpsc::UnboundedReceiver<Message>>>,
    waiting: Mutex<HashMap<u64, mpsc::UnboundedSender<(u32, Reply)>>>,
    next_request: AtomicU64,
    local: std::sync::OnceLock<Arc<dyn Local>>,
    /// Messages applied from peers, for the admin view.
    applied: AtomicU64,
    seal: Seal,
    rejected: Rejections,
    /// Why the engine can't be used, when it can't.
    trouble: Mutex<Option<String>>,
    /// A switchover of this instance asked peers to hold their writes.
    pausing: std::sync::atomic::AtomicBool,
    /// Since when (as this instance saw it) each gone member has been gone.
    gone_since: Mutex<HashMap<u32, Instant>>,
    /// What this instance last wrote of itself, and when.
    registered: Mutex<Option<(MemberInfo, Instant)>>,
}

/// Identity of this instance, from its configuration.
pub struct Identity {
    pub name: String,
    pub address: String,
    pub config_hash: String,
    pub xa_instance: String,
}

impl Fleet {
    pub fn new(
        config: &FleetConfig,
        identity: Identity,
        router: RouterSource,
        creds: Arc<BackendCredentials>,
        key: Option<Secret>,
    ) -> Arc<Fleet> {
        if key.is_none() {
            tracing::warn!(
                "no [fleet] secret and no admin token: fleet messages are sent and taken \
                 unsigned, so whoever can write the fleet's tables (or etcd prefix) can \
                 have this instance kill sessions or change its cache rules"
            );
        }
        let engine = match config.etcd.is_empty() {
            true => Engine::Servers(servers::Servers::new(
                &config.name,
                router.clone(),
                creds,
                config.poll,
            )),
            false => Engine::Etcd(etcd::Etcd::new(config)),
        };
        let (outbox, rx) = mpsc::unbounded_channel();
        let started_ms = unix_ms(SystemTime::now());
        Arc::new(Fleet {
            config: config.clone(),
            engine,
            me: Mutex::new(MemberInfo {
                slot: NO_SLOT,
                name: identity.name,
                address: identity.address,
                version: env!("CARGO_PKG_VERSION").into(),
                config_hash: identity.config_hash,
                xa_instance: identity.xa_instance,
                sessions: 0,
                duties: Vec::new(),
                started_ms,
                last_contact_ms: None,
                live: true,
            }),
            slot: AtomicU32::new(NO_SLOT),
            members: ArcSwap::from_pointee(Vec::new()),
            named_writer: Mutex::new(None),
            outbox,
            outbox_rx: Mutex::new(Some(rx)),
            waiting: Mutex::new(HashMap::new()),
            next_request: AtomicU64::new(1),
            local: std::sync::OnceLock::new(),
            applied: AtomicU64::new(0),
            seal: Seal::new(key.as_ref(), &config.name),
            rejected: Rejections::default(),
            trouble: Mutex::new(None),
            pausing: Default::default(),
            registered: Mutex::new(None),
            gone_since: Mutex::new(HashMap::new()),
        })
    }

    pub fn mode(&self) -> &'static str {
        match self.engine {
            Engine::Servers(_) => "servers",
            Engine::Etcd(_) => "etcd",
        }
    }

    /// This instance's slot, once it holds one.
    pub fn slot(&self) -> Option<u32> {
        Some(self.slot.load(Ordering::Acquire)).filter(|&s| s != NO_SLOT)
    }

    /// What session ids of this instance start with: its slot in the top byte (0 until
    /// it holds one, as a lone instance's ids are).
    pub fn id_prefix(&self) -> u32 {
        self.slot().unwrap_or(0) << SLOT_SHIFT
    }

    /// The live peer holding `slot`, if any.
    pub fn peer(&self, slot: u32) -> Option<MemberInfo> {
        (self.slot() != Some(slot))
            .then(|| {
                self.members
                    .load()
                    .iter()
                    .find(|m| m.slot == slot && m.live)
                    .cloned()
            })
            .flatten()
    }

    /// Every live peer.
    pub fn peers(&self) -> Vec<MemberInfo> {
        let me = self.slot();
        self.members
            .load()
            .iter()
            .filter(|m| m.live && Some(m.slot) != me)
            .cloned()
            .collect()
    }

    /// Every instance ever registered, live or not (the XA recovery's view).
    pub fn members(&self) -> Arc<Vec<MemberInfo>> {
        self.members.load_full()
    }

    /// The instances (hashed as transaction ids carry them) gone from the fleet for
    /// good, whose prepared cross-shard branches this instance is to finish: only while
    /// it holds the leader duty, and only for instances gone long enough that a live one
    /// cut off for a moment is never taken for dead (twice the lease with etcd, whose
    /// lease ending is the proof; with the servers, past two registrations too).
    pub fn orphaned_xa(&self) -> std::collections::HashSet<String> {
        let mut orphans = std::collections::HashSet::new();
        if !self.holds("leader") {
            return orphans;
        }
        let bound = match self.engine {
            Engine::Etcd(_) => self.config.lease * 2,
            Engine::Servers(_) => REGISTER_EVERY * 2 + self.config.lease,
        };
        let members = self.members.load();
        let live: std::collections::HashSet<&str> = members
            .iter()
            .filter(|m| m.live)
            .map(|m| m.xa_instance.as_str())
            .collect();
        let own = self.me.lock().xa_instance.clone();
        let gone = self.gone_since.lock();
        for m in members.iter().filter(|m| !m.live) {
            let seen_gone = gone.get(&m.slot).map_or(Duration::ZERO, |t| t.elapsed());
            let heard = Duration::from_millis(m.last_contact_ms.unwrap_or(0));
            if seen_gone.max(heard) >= bound
                && m.xa_instance != own
                && !live.contains(m.xa_instance.as_str())
            {
                orphans.insert(crate::shard::xa::hash(&m.xa_instance));
            }
        }
        orphans
    }

    pub fn named_writer(&self) -> Option<String> {
        self.named_writer.lock().clone()
    }

    /// Tells every other instance of a change made here (in order, in the background).
    pub fn publish(&self, change: Change) {
        if let Some(origin) = self.slot() {
            if let Some(name) = change_names_writer(&change) {
                *self.named_writer.lock() = Some(name);
            }
            let _ = self.outbox.send(Message::Change { origin, change });
        }
    }

    /// Sends `request` to the instance holding `to` (every live peer when None) and
    /// gathers the replies that come within `wait`.
    pub async fn ask(
        &self,
        to: Option<u32>,
        request: Request,
        wait: Duration,
    ) -> Vec<(u32, Reply)> {
        let Some(origin) = self.slot() else {
            return Vec::new();
        };
        let expected = match to {
            Some(slot) => usize::from(self.peer(slot).is_some()),
            None => self.peers().len(),
        };
        if expected == 0 {
            return Vec::new();
        }
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.waiting.lock().insert(id, tx);
        let _ = self.outbox.send(Message::Request {
            origin,
            to,
            id,
            request,
        });
        let mut replies = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while replies.len() < expected {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(r)) => replies.push(r),
                _ => break,
            }
        }
        self.waiting.lock().remove(&id);
        replies
    }

    /// Starts following the fleet; `local` carries out what peers ask.
    pub fn start(self: &Arc<Self>, local: Arc<dyn Local>, shutdown: Shutdown) {
        let _ = self.local.set(local);
        let Some(outbox) = self.outbox_rx.lock().take() else {
            return;
        };
        tokio::spawn(self.clone().send_loop(outbox, shutdown.clone()));
        tokio::spawn(self.clone().run(shutdown));
    }

    async fn send_loop(
        self: Arc<Self>,
        mut outbox: mpsc::UnboundedReceiver<Message>,
        mut shutdown: Shutdown,
    ) {
        loop {
            let m = tokio::select! {
                m = outbox.recv() => match m { Some(m) => m, None => return },
                _ = shutdown.stopping() => return,
            };
            let key = match &m {
                Message::Change { change, .. } => change.state_key(),
                _ => None,
            };
            // A change (rules, an invalidation, a server's state, the writer) is tried
            // again while the engine can't take it, as when the servers are between two
            // writers; later messages wait behind it, keeping the order. A request or a
            // reply is not: its asker stops waiting long before.
            let retry_until =
                matches!(m, Message::Change { .. }).then(|| Instant::now() + RESEND_FOR);
            loop {
                // Sealed at each try: its time is when it is sent.
                let sent = match self.seal.seal(&m, unix_ms(SystemTime::now())) {
                    Ok(body) => match &self.engine {
                        Engine::Servers(s) => s.send(m.origin(), &body, key.as_deref()).await,
                        Engine::Etcd(e) => e.send(&body, key.as_deref()).await,
                    },
                    Err(e) => Err(e),
                };
                let Err(e) = sent else { break };
                if retry_until.is_none_or(|until| Instant::now() >= until) {
                    tracing::warn!(error = %e, "a fleet message was not sent: peers won't see it");
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep(self.config.poll) => {}
                    _ = shutdown.stopping() => return,
                }
            }
        }
    }

    fn heartbeat_every(&self) -> Duration {
        (self.config.lease / 3).max(Duration::from_millis(500))
    }

    async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        let every = self.heartbeat_every();
        let mut next_beat = Instant::now();
        let mut pruned = Instant::now();
        let mut caught_up = false;
        loop {
            if Instant::now() >= next_beat {
                next_beat = Instant::now() + every;
                tokio::select! {
                    _ = self.beat(&mut caught_up) => {}
                    _ = shutdown.stopping() => break,
                }
                if pruned.elapsed() > Duration::from_secs(60) && self.holds("leader") {
                    pruned = Instant::now();
                    if let Engine::Servers(s) = &self.engine {
                        s.prune().await;
                    }
                }
            }
            let wait = next_beat.saturating_duration_since(Instant::now());
            let messages = tokio::select! {
                m = self.next(wait) => m,
                _ = shutdown.stopping() => break,
            };
            for m in self.open(messages, Read::Log) {
                self.dispatch(m);
            }
        }
        match &self.engine {
            Engine::Servers(s) => s.leave().await,
            Engine::Etcd(e) => e.leave().await,
        }
    }

    async fn next(&self, wait: Duration) -> Vec<Vec<u8>> {
        if self.slot().is_none() {
            tokio::time::sleep(wait).await;
            return Vec::new();
        }
        match &self.engine {
            Engine::Servers(s) => s.next(wait).await,
            Engine::Etcd(e) => e.next(wait).await,
        }
    }

    fn holds(&self, duty: &str) -> bool {
        self.me.lock().duties.iter().any(|d| d == duty)
    }

    /// Takes or keeps the slot, the `leader` duty and the registration; reads the
    /// members; on the first success, the shared state.
    async fn beat(&self, caught_up: &mut bool) {
        let Some(slot) = self.claim_slot().await else {
            self.trouble("no slot yet: too few servers (or etcd) answer");
            return;
        };
        if self.slot.swap(slot, Ordering::AcqRel) != slot {
            tracing::info!(slot, mode = self.mode(), "joined the fleet");
        }
        let me = self.refresh_me(slot).await;
        let members = match self.register_if_due(&me).await {
            Ok(()) => match &self.engine {
                Engine::Servers(s) => s.members().await,
                Engine::Etcd(e) => e.members().await,
            },
            Err(e) => Err(e),
        };
        match members {
            Ok(members) => self.learn_members(members),
            Err(e) => {
                self.trouble(&e);
                return;
            }
        }
        if !*caught_up {
            *caught_up = self.catch_up().await;
        }
    }

    /// This instance's slot, claimed or held; on the servers, trouble when it is held
    /// on too few of them.
    async fn claim_slot(&self) -> Option<u32> {
        match &self.engine {
            Engine::Servers(s) => {
                let slot = s.claim().await?;
                if !s.keep().await {
                    self.trouble("this instance holds its slot on too few servers");
                }
                Some(slot)
            }
            Engine::Etcd(e) => {
                let me = self.me.lock().clone();
                e.claim(&me).await
            }
        }
    }

    /// This instance as the fleet sees it: its slot, its sessions, the leader duty if held.
    async fn refresh_me(&self, slot: u32) -> MemberInfo {
        let leader = match &self.engine {
            Engine::Servers(s) => s.hold_duty("leader").await,
            Engine::Etcd(e) => e.hold_duty("leader").await,
        };
        let mut me = self.me.lock();
        me.slot = slot;
        me.sessions = self.local.get().map_or(0, |l| l.sessions());
        me.duties = leader.then(|| "leader".to_owned()).into_iter().collect();
        me.clone()
    }

    /// Writes this instance's entry when [`Self::registration_due`].
    async fn register_if_due(&self, me: &MemberInfo) -> Result<(), String> {
        if !self.registration_due(me) {
            return Ok(());
        }
        let written = match &self.engine {
            Engine::Servers(s) => s.register(me).await,
            Engine::Etcd(e) => e.register(me).await,
        };
        if written.is_ok() {
            *self.registered.lock() = Some((me.clone(), Instant::now()));
        }
        written
    }

    /// Keeps the members read and since when the gone ones are gone; the trouble is over.
    fn learn_members(&self, members: Vec<MemberInfo>) {
        {
            let mut gone = self.gone_since.lock();
            for m in &members {
                if m.live {
                    gone.remove(&m.slot);
                } else {
                    gone.entry(m.slot).or_insert_with(Instant::now);
                }
            }
        }
        self.members.store(Arc::new(members));
        *self.trouble.lock() = None;
    }

    /// Whether this instance is caught up: alone (a fleet started afresh starts from its
    /// files, not from what an earlier run changed at runtime), or once it has applied the
    /// shared state, which is what the running fleet applies now: a joining one takes it.
    async fn catch_up(&self) -> bool {
        let me = self.slot();
        if !self
            .members
            .load()
            .iter()
            .any(|m| m.live && Some(m.slot) != me)
        {
            return true;
        }
        let state = match &self.engine {
            Engine::Servers(s) => s.state().await,
            Engine::Etcd(e) => e.state().await,
        };
        let Ok(state) = state else {
            return false;
        };
        for m in self.open(state, Read::State) {
            if let Message::Change { change, .. } = m {
                self.apply(&change, false);
            }
        }
        true
    }

    /// Whether this instance's row is to be written again: something peers act on
    /// changed, or [`REGISTER_EVERY`] passed (liveness is the slot's hold, not the row:
    /// a write on the writer each beat would be a commit no client made, each time).
    fn registration_due(&self, me: &MemberInfo) -> bool {
        match &*self.registered.lock() {
            None => true,
            Some((last, at)) => {
                let same = MemberInfo {
                    sessions: me.sessions,
                    ..last.clone()
                };
                same != *me || at.elapsed() > REGISTER_EVERY
            }
        }
    }

    fn trouble(&self, why: &str) {
        let mut t = self.trouble.lock();
        if t.as_deref() != Some(why) {
            tracing::warn!(why, "fleet");
            *t = Some(why.to_owned());
        }
    }

    /// The messages read that pass the signature check; the others are counted.
    fn open(&self, raw: Vec<Vec<u8>>, read: Read) -> Vec<Message> {
        let now = unix_ms(SystemTime::now());
        raw.iter()
            .filter_map(|r| match self.seal.open(r, now, read) {
                Ok(Some(m)) => Some(m),
                Ok(None) => {
                    tracing::debug!("a fleet message this version does not read, skipped");
                    None
                }
                Err(refused) => {
                    self.rejected.record(&refused, read);
                    None
                }
            })
            .collect()
    }

    fn apply(&self, change: &Change, live: bool) {
        if let Some(name) = change_names_writer(change) {
            *self.named_writer.lock() = Some(name);
        }
        if let Some(local) = self.local.get() {
            local.apply(change, live);
        }
        self.applied.fetch_add(1, Ordering::Relaxed);
    }

    fn dispatch(self: &Arc<Self>, m: Message) {
        let me = self.slot();
        if Some(m.origin()) == me {
            return;
        }
        match m {
            Message::Change { change, .. } => self.apply(&change, true),
            Message::Request {
                origin,
                to,
                id,
                request,
            } if to.is_none() || to == me => {
                let (Some(me), Some(local)) = (me, self.local.get().cloned()) else {
                    return;
                };
                let outbox = self.outbox.clone();
                tokio::spawn(async move {
                    let reply = local.handle(request).await;
                    let _ = outbox.send(Message::Reply {
                        origin: me,
                        to: origin,
                        id,
                        reply,
                    });
                });
            }
            Message::Reply {
                origin,
                to,
                id,
                reply,
            } if Some(to) == me => {
                if let Some(w) = self.waiting.lock().get(&id) {
                    let _ = w.send((origin, reply));
                }
            }
            _ => {}
        }
    }

    /// The fleet's part of `/metrics`.
    pub fn metrics(&self, e: &mut crate::admin::metrics::Exposition) {
        let members = self.members.load();
        e.declare(&INSTANCES);
        for (state, live) in [("live", true), ("gone", false)] {
            let n = members.iter().filter(|m| m.live == live).count();
            e.sample(INSTANCES.name, &[("state", state)], n as f64);
        }
        e.only(&SLOT, self.slot().map_or(-1.0, f64::from));
        e.only(&LEADER, f64::from(u8::from(self.holds("leader"))));
        e.only(&APPLIED, self.applied.load(Ordering::Relaxed) as f64);
        e.declare(&REJECTED);
        for reason in Reason::ALL {
            let n = self.rejected.count(reason) as f64;
            e.sample(REJECTED.name, &[("reason", reason.as_str())], n);
        }
    }

    /// `GET /v1/fleet`.
    pub fn view(&self) -> serde_json::Value {
        let me = self.me.lock().clone();
        serde_json::json!({
            "mode": self.mode(),
            "name": self.config.name,
            "instance": me.name,
            "slot": self.slot(),
            "named_writer": self.named_writer(),
            "changes_applied": self.applied.load(Ordering::Relaxed),
            "trouble": *self.trouble.lock(),
            "members": *self.members.load_full(),
        })
    }
}

impl crate::admin::FleetAdmin for Fleet {
    fn fleet(&self) -> serde_json::Value {
        self.view()
    }
}

impl crate::router::Coordination for Fleet {
    fn named_writer(&self) -> Option<String> {
        Fleet::named_writer(self)
    }

    fn begin_writer_change(&self) -> crate::router::BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match &self.engine {
                // The writer lock on the servers decides.
                Engine::Servers(_) => Ok(()),
                Engine::Etcd(e) if e.hold_duty("writer").await => Ok(()),
                Engine::Etcd(_) => Err("with [fleet] etcd, only the instance holding the \
                    `writer` duty in etcd changes the writer: another instance holds it, or \
                    etcd can't be reached from this one"
                    .into()),
            }
        })
    }

    fn end_writer_change(&self, to: Option<String>) -> crate::router::BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Engine::Etcd(e) = &self.engine {
                e.release_duty("writer").await;
            }
            let change = match (self.pausing.swap(false, Ordering::AcqRel), to) {
                (true, to) => Change::SwitchoverEnded { to },
                (false, Some(name)) => Change::Writer { name },
                (false, None) => return,
            };
            self.publish(change);
        })
    }

    fn pause_peers(&self, from: &str, timeout: Duration) -> crate::router::BoxFuture<'_, ()> {
        let request = Request::PauseWrites {
            from: from.to_owned(),
            timeout_ms: timeout.as_millis() as u64,
        };
        Box::pin(async move {
            self.pausing.store(true, Ordering::Release);
            let replies = self.ask(None, request, timeout).await;
            let drained = replies
                .iter()
                .filter(|(_, r)| matches!(r, Reply::Paused { drained: true }))
                .count();
            tracing::info!(
                peers = replies.len(),
                drained,
                "peers hold their writes for the switchover"
            );
        })
    }
}

fn change_names_writer(change: &Change) -> Option<String> {
    match change {
        Change::Writer { name } => Some(name.clone()),
        Change::SwitchoverEnded { to: Some(name) } => Some(name.clone()),
        _ => None,
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A short hash of a configuration's text: what `config_hash` shows.
pub fn config_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_the_top_byte_of_an_id() {
        assert_eq!(slot_of(5), 0);
        assert_eq!(slot_of((3 << SLOT_SHIFT) | 5), 3);
        assert_eq!(slot_of(u32::MAX), SLOTS - 1);
        assert_eq!(LOCAL_ID_MASK, 0x00ff_ffff);
    }
}
