//! Coordination through etcd v3. Under `/sluice/<fleet name>/`:
//! - `slots/<n>`: a member's information, under its lease: the key is created only if
//!   absent (so one instance holds a slot) and goes when the lease ends;
//! - `members/<n>`: the same, without a lease, so that a dead member's cross-shard
//!   transactions can be finished by a survivor;
//! - `duty/<name>`: the slot holding a duty, under its lease;
//! - `state/<key>`: the shared state (the latest change of each kind);
//! - `log`: one key, put once per message: watching it from a revision gives every
//!   message since, in order, to every instance at once.

use super::{FleetConfig, MemberInfo, SLOTS};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp, WatchOptions,
    WatchStream,
};
use std::collections::BTreeMap;
use std::time::Duration;

pub struct Etcd {
    endpoints: Vec<String>,
    prefix: String,
    ttl: Duration,
    inner: tokio::sync::Mutex<Inner>,
    watch: tokio::sync::Mutex<Watch>,
}

#[derive(Default)]
struct Inner {
    client: Option<Client>,
    /// The lease, and the slot held under it.
    lease: Option<Lease>,
    slot: Option<u32>,
    duties: Vec<String>,
}

struct Lease {
    id: i64,
    keeper: etcd_client::LeaseKeeper,
    /// etcd's answer to each keep-alive: the time the lease has left.
    answers: etcd_client::LeaseKeepAliveStream,
}

#[derive(Default)]
struct Watch {
    stream: Option<WatchStream>,
    /// The revision to read the log from next (0: from now).
    from: i64,
}

type Result<T> = std::result::Result<T, String>;

fn err(e: etcd_client::Error) -> String {
    format!("etcd: {e}")
}

impl Etcd {
    pub fn new(config: &FleetConfig) -> Etcd {
        Etcd {
            endpoints: config.etcd.clone(),
            prefix: format!("/sluice/{}/", config.name),
            ttl: config.lease,
            inner: Default::default(),
            watch: Default::default(),
        }
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    /// Bounds every call: a cut-off etcd must not hold anything up for long.
    fn limit(&self) -> Duration {
        (self.ttl / 2).max(Duration::from_secs(1))
    }

    async fn client(&self, inner: &mut Inner) -> Result<Client> {
        if let Some(c) = &inner.client {
            return Ok(c.clone());
        }
        let options = ConnectOptions::new()
            .with_connect_timeout(self.limit())
            .with_timeout(self.limit());
        let c = tokio::time::timeout(
            self.limit(),
            Client::connect(&self.endpoints, Some(options)),
        )
        .await
        .map_err(|_| "etcd: no connection".to_owned())?
        .map_err(err)?;
        inner.client = Some(c.clone());
        Ok(c)
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        tokio::time::timeout(self.limit(), call)
            .await
            .map_err(|_| "etcd: no answer in time".to_owned())?
            .map_err(err)
    }

    /// Keeps the lease alive (a new one when it lapsed, losing the slot and duties
    /// held under the old) and holds a slot. None: etcd can't be reached, or every
    /// slot is taken.
    pub async fn claim(&self, me: &MemberInfo) -> Option<u32> {
        let mut inner = self.inner.lock().await;
        match self.keep_lease(&mut inner).await {
            Ok(()) => {}
            Err(e) => {
                tracing::debug!(error = %e, "fleet lease");
                inner.client = None;
                return None;
            }
        }
        if inner.slot.is_some() {
            return inner.slot;
        }
        let mut c = self.client(&mut inner).await.ok()?;
        let lease = inner.lease.as_ref()?.id;
        for slot in 0..SLOTS {
            let key = self.key(&format!("slots/{slot}"));
            let mut info = me.clone();
            info.slot = slot;
            let value = serde_json::to_string(&info).ok()?;
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key,
                    value,
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            match self.bounded(c.txn(txn)).await {
                Ok(r) if r.succeeded() => {
                    inner.slot = Some(slot);
                    return Some(slot);
                }
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    async fn keep_lease(&self, inner: &mut Inner) -> Result<()> {
        let mut c = self.client(inner).await?;
        if let Some(lease) = &mut inner.lease {
            let alive = async {
                lease.keeper.keep_alive().await?;
                lease.answers.message().await
            };
            if let Ok(Some(answer)) = self.bounded(alive).await {
                if answer.ttl() > 0 {
                    return Ok(());
                }
            }
            tracing::warn!("the fleet lease lapsed: this instance's slot and duties are gone");
        }
        inner.slot = None;
        inner.duties.clear();
        let ttl = self.ttl.as_secs().max(2) as i64;
        let lease = self.bounded(c.lease_grant(ttl, None)).await?;
        let (keeper, answers) = self.bounded(c.lease_keep_alive(lease.id())).await?;
        inner.lease = Some(Lease {
            id: lease.id(),
            keeper,
            answers,
        });
        Ok(())
    }

    pub async fn hold_duty(&self, duty: &str) -> bool {
        let mut inner = self.inner.lock().await;
        let (Some(slot), Some(lease)) = (inner.slot, inner.lease.as_ref().map(|l| l.id)) else {
            return false;
        };
        let Ok(mut c) = self.client(&mut inner).await else {
            return false;
        };
        let key = self.key(&format!("duty/{duty}"));
        let mine = slot.to_string();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                mine.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key, None)]);
        let held = match self.bounded(c.txn(txn)).await {
            Ok(r) if r.succeeded() => true,
            Ok(r) => r.op_responses().iter().any(|op| match op {
                etcd_client::TxnOpResponse::Get(g) => g
                    .kvs()
                    .iter()
                    .any(|kv| kv.value() == mine.as_bytes() && kv.lease() == lease),
                _ => false,
            }),
            Err(_) => false,
        };
        inner.duties.retain(|d| d != duty);
        if held {
            inner.duties.push(duty.to_owned());
        }
        held
    }

    /// Gives a duty back, if this instance holds it.
    pub async fn release_duty(&self, duty: &str) {
        let mut inner = self.inner.lock().await;
        let Some(slot) = inner.slot else { return };
        let Ok(mut c) = self.client(&mut inner).await else {
            return;
        };
        let key = self.key(&format!("duty/{duty}"));
        let txn = Txn::new()
            .when([Compare::value(
                key.clone(),
                CompareOp::Equal,
                slot.to_string(),
            )])
            .and_then([TxnOp::delete(key, None)]);
        let _ = self.bounded(c.txn(txn)).await;
        inner.duties.retain(|d| d != duty);
    }

    pub async fn register(&self, me: &MemberInfo) -> Result<()> {
        let mut inner = self.inner.lock().await;
        let lease = inner.lease.as_ref().map(|l| l.id).ok_or("etcd: no lease")?;
        let mut c = self.client(&mut inner).await?;
        let value = serde_json::to_string(me).map_err(|e| e.to_string())?;
        let live = self.key(&format!("slots/{}", me.slot));
        let known = self.key(&format!("members/{}", me.slot));
        self.bounded(c.put(
            live,
            value.clone(),
            Some(PutOptions::new().with_lease(lease)),
        ))
        .await?;
        self.bounded(c.put(known, value, None)).await?;
        Ok(())
    }

    /// Live members (their slot key exists) and the others once registered.
    pub async fn members(&self) -> Result<Vec<MemberInfo>> {
        let mut c = {
            let mut inner = self.inner.lock().await;
            self.client(&mut inner).await?
        };
        let mut all: BTreeMap<u32, MemberInfo> = BTreeMap::new();
        for (part, live) in [("members/", false), ("slots/", true)] {
            let r = self
                .bounded(c.get(self.key(part), Some(GetOptions::new().with_prefix())))
                .await?;
            for kv in r.kvs() {
                if let Ok(mut m) = serde_json::from_slice::<MemberInfo>(kv.value()) {
                    m.live = live;
                    all.insert(m.slot, m);
                }
            }
        }
        Ok(all.into_values().collect())
    }

    /// Puts a message (`body`, as [`super::message::Seal`] made it) on the log key, and
    /// under `state/<state_key>`.
    pub async fn send(&self, body: &str, state_key: Option<&str>) -> Result<()> {
        let mut c = {
            let mut inner = self.inner.lock().await;
            self.client(&mut inner).await?
        };
        if let Some(key) = state_key {
            self.bounded(c.put(self.key(&format!("state/{key}")), body, None))
                .await?;
        }
        self.bounded(c.put(self.key("log"), body, None)).await?;
        Ok(())
    }

    /// The messages put since the last call, as written, waiting up to `wait` for the
    /// first.
    pub async fn next(&self, wait: Duration) -> Vec<Vec<u8>> {
        let mut watch = self.watch.lock().await;
        if watch.stream.is_none() {
            let Ok(mut c) = ({
                let mut inner = self.inner.lock().await;
                self.client(&mut inner).await
            }) else {
                tokio::time::sleep(wait).await;
                return Vec::new();
            };
            let options = WatchOptions::new().with_start_revision(watch.from);
            match self.bounded(c.watch(self.key("log"), Some(options))).await {
                Ok(s) => watch.stream = Some(s),
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    return Vec::new();
                }
            }
        }
        let mut out = Vec::new();
        let mut wait = wait;
        while let Some(stream) = watch.stream.as_mut() {
            match tokio::time::timeout(wait, stream.message()).await {
                Err(_) => break,
                Ok(Ok(Some(r))) => {
                    if r.canceled() {
                        watch.stream = None;
                        break;
                    }
                    for e in r.events() {
                        let Some(kv) = e.kv() else { continue };
                        watch.from = kv.mod_revision() + 1;
                        // A deletion of the key (by hand) is no message.
                        if e.event_type() == etcd_client::EventType::Put {
                            out.push(kv.value().to_vec());
                        }
                    }
                    // Whatever else arrived with it, without waiting again.
                    wait = Duration::ZERO;
                }
                Ok(_) => {
                    watch.stream = None;
                    break;
                }
            }
        }
        out
    }

    /// The shared state entries, as written, oldest first.
    pub async fn state(&self) -> Result<Vec<Vec<u8>>> {
        let mut c = {
            let mut inner = self.inner.lock().await;
            self.client(&mut inner).await?
        };
        let r = self
            .bounded(c.get(self.key("state/"), Some(GetOptions::new().with_prefix())))
            .await?;
        let mut state: Vec<(i64, Vec<u8>)> = r
            .kvs()
            .iter()
            .map(|kv| (kv.mod_revision(), kv.value().to_vec()))
            .collect();
        state.sort_by_key(|(rev, _)| *rev);
        // The log is read from what follows this state.
        let mut watch = self.watch.lock().await;
        if watch.from == 0 {
            watch.from = r.header().map_or(0, |h| h.revision()) + 1;
            watch.stream = None;
        }
        Ok(state.into_iter().map(|(_, m)| m).collect())
    }

    /// Ends the lease: the slot and the duties go at once rather than at its end.
    pub async fn leave(&self) {
        let mut inner = self.inner.lock().await;
        if let (Some(lease), Some(c)) = (inner.lease.take(), inner.client.as_mut()) {
            let _ = tokio::time::timeout(Duration::from_secs(1), c.lease_revoke(lease.id)).await;
        }
    }
}
