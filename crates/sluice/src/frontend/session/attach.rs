//! How a session gets its backing: at login and at COM_CHANGE_USER, a connection of its
//! own or a fresh multiplexed state, and the pool keys of its connections.

use super::super::login::{self, AuthOutcome, LoggedIn};
use super::{mux, Backing, Session};
use crate::auth::User;
use crate::backend::{on_schema, ConnParams, PoolKey};
use crate::error::{code, BackendError, Failed, SessionError};
use crate::router::Target;
use crate::stats::Stats;
use sluice_wire::command::Command;
use sluice_wire::handshake::ChangeUser;
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::CapabilityFlags;
use std::sync::Arc;

impl Session {
    /// The pool key of connections that speak exactly the client's wire format.
    pub(super) fn key(&self, user: &User) -> PoolKey {
        PoolKey::new(user.backend.clone(), self.params(false))
    }

    /// The key of a connection the session owns: it carries the client's attributes
    /// when configured so (the server keeps those of the login only).
    pub(super) fn own_key(&self, user: &User) -> PoolKey {
        let key = self.key(user);
        if self.fe.pool_config.forward_attributes && !self.attributes.is_empty() {
            return key.with_attributes(self.attributes.clone());
        }
        key
    }

    pub(super) fn params(&self, multiplexed: bool) -> ConnParams {
        let mut wire_caps = self.client.caps.0 & CapabilityFlags::WIRE_FORMAT;
        if multiplexed {
            wire_caps |= CapabilityFlags::SESSION_TRACK;
        }
        ConnParams {
            wire_caps,
            mariadb_caps: self.client.mariadb_caps,
            charset: self.charset,
            track_state: multiplexed,
        }
    }

    /// The pool key a multiplexed session's connections have: the client's format with
    /// session tracking on (OK packets are rewritten for clients that lack it).
    pub(super) fn mux_key(&self, user: &User) -> PoolKey {
        PoolKey::new(user.backend.clone(), self.params(true))
    }

    /// Whether this session's connections are shared: configured, and the servers
    /// report session state.
    pub(super) fn multiplexed(&self) -> bool {
        self.fe.pool_config.multiplex
            && self
                .fe
                .identity
                .load()
                .caps
                .contains(CapabilityFlags::SESSION_TRACK)
    }

    /// Leases the backend connection and answers the login with OK, or with the error
    /// that prevented it. Returns whether the session goes on.
    pub(super) async fn finish_login(&mut self, l: LoggedIn) -> bool {
        match self.attach(self.user.clone(), l.database.as_deref()).await {
            Ok(()) => {
                let status = self.last_status();
                let ok = OkPacket {
                    status,
                    ..Default::default()
                };
                if self.client.write_ok(l.next_seq, &ok).await.is_err() {
                    return false;
                }
                self.release_if_free().await.is_ok()
            }
            Err(Failed::Answered(err)) => {
                let _ = self.client.write_err(l.next_seq, &err).await;
                false
            }
            Err(Failed::Broken(e)) => {
                tracing::warn!(error = %e, "no backend connection for a client");
                let _ = self.client.write_err(l.next_seq, &e.to_err_packet()).await;
                false
            }
        }
    }

    /// Leases a backend connection for `user` on `schema`. Answered: the server's
    /// answer to the login or to selecting the schema (unknown database...).
    pub(super) async fn attach(
        &mut self,
        user: Arc<User>,
        schema: Option<&[u8]>,
    ) -> Result<(), Failed<BackendError>> {
        self.backing.drop_conn();
        if self.multiplexed() {
            return self.attach_multiplexed(user, schema).await;
        }
        let key = self.own_key(&user);
        let router = self.fe.router.load_full();
        let started = std::time::Instant::now();
        let mut conn = loop {
            let leased = router
                .lease(&Target::Writer, &[], &key, schema, on_schema(schema), 1)
                .await
                .map(|(conn, _)| conn);
            let conn = match leased {
                Ok(c) => c,
                Err(BackendError::Rejected { err, .. }) => return Err(Failed::Answered(err)),
                Err(e) => return Err(e.into()),
            };
            // One that logged in with older rights is closed, with its like: again.
            if let Some(conn) = super::grants::dedicated_fit(conn, &key.creds.user, started).await?
            {
                break conn;
            }
        };
        // A connection that waited in the pool has the session values of the globals of
        // its login or last reset; a reset now gives it those of this moment, as a new
        // server session gets (the server re-reads its globals on a reset).
        if !conn.fresh {
            let reset = conn.simple_command(&[Command::ResetConnection as u8]);
            if let Err(failed) = reset.await {
                // Refused or lost, it is not a connection to keep: closed, not cleaned
                // for the pool (which would send its reset again).
                conn.mark_broken();
                return Err(Failed::Answered(failed.answered()?));
            }
        }
        if let Err(failed) = conn.ensure_schema(schema).await {
            if failed.is_broken() {
                conn.mark_broken();
            }
            return Err(failed);
        }
        self.live.attach(&conn.server, conn.thread_id);
        if let Some(e) = self.fe.sessions.lock().get_mut(&self.id) {
            e.user = user.name.clone();
            e.login = user.backend.clone();
        }
        self.user = user;
        self.backing = Backing::Dedicated(conn);
        if let Some(c) = self.cache.as_mut() {
            c.reset(schema);
        }
        Ok(())
    }

    /// A multiplexed session starts with a fresh state and no connection. A schema asked
    /// for is checked on a connection if one is free right now; otherwise the first
    /// statement's `COM_INIT_DB` checks it (a login never waits in the queue).
    async fn attach_multiplexed(
        &mut self,
        user: Arc<User>,
        schema: Option<&[u8]>,
    ) -> Result<(), Failed<BackendError>> {
        let key = self.mux_key(&user);
        let translate = !self.client.caps.contains(CapabilityFlags::SESSION_TRACK);
        // MariaDB (which does not set CLIENT_LONG_PASSWORD) length-codes the info string
        // of an OK for every client; MySQL only for clients that track session state.
        let mariadb = self.fe.identity.load().caps.0 & CapabilityFlags::LONG_PASSWORD == 0;
        let owned = schema.map(<[u8]>::to_vec);
        match &mut self.backing {
            Backing::Multiplexed { mux, .. } => mux.reset(key.clone(), owned),
            Backing::Dedicated(_) | Backing::Detached => {
                let mux = mux::Mux::new(key.clone(), owned, translate, mariadb);
                self.backing = Backing::Multiplexed {
                    mux: Box::new(mux),
                    conn: None,
                };
            }
        }
        if let Some(e) = self.fe.sessions.lock().get_mut(&self.id) {
            e.user = user.name.clone();
            e.login = user.backend.clone();
        }
        self.user = user;
        if let Some(c) = self.cache.as_mut() {
            c.reset(schema);
        }
        // Unless the pool is busy, the login proves the server is there, takes the
        // backend login, and knows the schema.
        let router = self.fe.router.load_full();
        let conn = match router.try_lease_writer(&key, schema).await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(BackendError::Rejected { err, .. }) => return Err(Failed::Answered(err)),
            Err(e) => return Err(e.into()),
        };
        self.backing.hold(conn);
        // One that logged in with older rights is gone: the first statement leases.
        if !self.mux_grants_fit().await? {
            return Ok(());
        }
        let conn = self.backing.conn_mut().expect("kept");
        if let Err(failed) = conn.ensure_schema(schema).await {
            if failed.is_broken() {
                conn.mark_broken();
            }
            self.backing.drop_conn();
            return Err(failed);
        }
        if let Err(e) = self.align_globals().await {
            self.backing.close_conn();
            return Err(e.into());
        }
        self.publish();
        Ok(())
    }

    /// COM_CHANGE_USER: authenticate the new user here, then give the session a clean
    /// backend connection for that user and schema.
    pub(super) async fn change_user(&mut self) -> Result<bool, SessionError> {
        let packet = self
            .client
            .read_packet(self.fe.limits.max_decoded_packet)
            .await?;
        let request = match ChangeUser::parse(&packet.payload, self.client.caps) {
            Ok(r) => r,
            Err(e) => {
                self.client
                    .write_err(
                        packet.last_seq.wrapping_add(1),
                        &ErrPacket::new(
                            code::ER_HANDSHAKE_ERROR,
                            "08S01",
                            format!("Bad handshake ({e})"),
                        ),
                    )
                    .await?;
                return Ok(false);
            }
        };
        let plugin = request
            .auth_plugin
            .as_deref()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_else(|| sluice_wire::auth::NATIVE_PASSWORD.into());
        // Clients scramble with the nonce of the initial handshake, which the session
        // does not keep: an auth switch with a fresh nonce makes them answer again.
        let outcome = login::authenticate(
            &self.fe,
            &mut self.client,
            &request.username,
            &plugin,
            request.auth_response.clone(),
            &[],
            packet.last_seq.wrapping_add(1),
            true,
        )
        .await?;
        match outcome {
            AuthOutcome::Accepted { user, next_seq } => {
                if let Some(cs) = request.charset {
                    self.charset = cs as u8;
                }
                let previous = self.user.name.clone();
                match self.attach(user, request.database.as_deref()).await {
                    Ok(()) => {
                        if previous != self.user.name {
                            self.fe.user_disconnected(&previous);
                            // Counted without a limit: the login already passed.
                            self.fe.user_connected(&self.user.name, 0);
                        }
                        let status = self.last_status();
                        let ok = OkPacket {
                            status,
                            ..Default::default()
                        };
                        self.client.write_ok(next_seq, &ok).await?;
                        if self.backing.is_multiplexed() {
                            self.release_if_free().await?;
                        }
                        Ok(true)
                    }
                    Err(failed) => {
                        self.client
                            .write_err(next_seq, &failed.to_err_packet())
                            .await?;
                        Ok(false)
                    }
                }
            }
            AuthOutcome::Refused { err, next_seq } => {
                Stats::incr(&self.fe.stats.auth_failures);
                self.client.write_err(next_seq, &err).await?;
                Ok(false)
            }
        }
    }
}
