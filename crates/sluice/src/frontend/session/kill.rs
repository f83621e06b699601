//! KILL, carried out by Sluice on its own sessions with the server's rules: a session
//! may be killed by its own user, or by an account with `CONNECTION ADMIN` (or `SUPER`)
//! on the server; ids are Sluice's session ids; nothing is ever forwarded with the
//! client's number, which on the server names some other thread.

use super::Session;
use crate::classify::kill::{self, Kill, KillScan, KillTarget};
use crate::classify::Action;
use crate::error::{code, BackendError, Failed, RefusedAsNone, SessionError};
use crate::frontend::SessionEntry;
use crate::router::Target;
use sluice_wire::command::{Command, Request};
use sluice_wire::packet::HEADER_LEN;
use sluice_wire::response::{ErrPacket, OkPacket};
use sluice_wire::tracker::ResponseKind;
use sluice_wire::StatusFlags;

/// Statement texts are read in whole, to be screened (for KILL here, for
/// `CONNECTION_ID()` in `identity`), up to this length. Past it, KILL is looked for in
/// this much only and nothing is rewritten (documented: long texts are bulk loads).
pub(super) const SCREEN_MAX: usize = 1 << 20;

/// Whether the killer's account may kill other accounts' sessions: `SUPER` or
/// `CONNECTION ADMIN`, held directly or through an enabled role. `CURRENT_USER()` is
/// `user@host`; `USER_PRIVILEGES` names grantees `'user'@'host'` (roles `'role'`).
const PRIVILEGE_CHECK: &str = "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES \
    WHERE PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN') AND (GRANTEE = CONCAT('''', \
    LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER()) \
    - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), \
    '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''') \
    OR GRANTEE IN (SELECT CONCAT('''', ROLE_NAME, '''') FROM information_schema.ENABLED_ROLES))";

/// How long a KILL waits for the peer holding the session to answer.
const PEER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What the KILL statement answers.
enum Answer {
    Ok {
        killed: u64,
    },
    Refused(ErrPacket),
    /// The session killed itself: OK or the server's error, then the connection closes.
    EndSelf(Option<ErrPacket>),
}

/// What stands in for a KILL Sluice carried out, in a text the server still runs: its
/// OK is the one the KILL gets (no rows, no warnings), and it changes nothing.
const STAND_IN: &[u8] = b"DO 0";

/// What the leading KILLs of a multi-statement came to.
pub(super) enum Leading {
    /// One was refused (or ended the session): answered, nothing else runs. Whether
    /// the session goes on.
    Answered(bool),
    /// The text, rewritten, goes to the server: this is its new length.
    Run(usize),
}

impl Session {
    /// Looks at a statement's text (COM_QUERY, COM_STMT_PREPARE) for KILL, reading it in
    /// first: a KILL is carried out here, or refused when Sluice can't do it as the server
    /// would; anything else goes on as `request` (its text possibly rewritten: callers
    /// read its length again). Also follows what KILL forms depend on: the
    /// multi-statement option, and the SQL prepared statements that hold a KILL.
    pub(super) async fn screen_kill(
        &mut self,
        request: Request,
        len: usize,
    ) -> Result<Action, SessionError> {
        let kind = request.kind;
        match request.command {
            Command::SetOption => {
                match self.client.rbuf.get(HEADER_LEN + 1..HEADER_LEN + 3) {
                    Some([0, 0]) => self.multi_statements = true,
                    Some([1, 0]) => self.multi_statements = false,
                    _ => {}
                }
                return Ok(Action::Forward(request));
            }
            // The server drops the session's prepared statements.
            Command::ResetConnection => self.kill_statements.clear(),
            _ => {}
        }
        if !matches!(kind, ResponseKind::Query | ResponseKind::Prepare) {
            return Ok(Action::Forward(request));
        }
        let want = HEADER_LEN + len.min(SCREEN_MAX);
        self.client.fill_to(want).await?;
        let text = &self.client.rbuf[HEADER_LEN + 1..want];
        if kind == ResponseKind::Query && !self.kill_statements.is_empty() {
            let (statements, uses) = kill::name_uses(text);
            if let Some(action) = self.prepared_kill(statements, &uses) {
                return Ok(action);
            }
            for used in uses {
                if let kill::NameUse::Forget(name) = used {
                    self.kill_statements.remove(&name);
                }
            }
        }
        let text = &self.client.rbuf[HEADER_LEN + 1..want];
        if !kill::may_kill(text) {
            return Ok(Action::Forward(request));
        }
        let whole = len < SCREEN_MAX;
        Ok(match (kind, kill::scan(text)) {
            (_, KillScan::None) => Action::Forward(request),
            (ResponseKind::Query, KillScan::Alone(k) | KillScan::Immediate(k)) => Action::Kill(k),
            (ResponseKind::Query, KillScan::Leading(kills)) if whole => Action::KillLeading(kills),
            (ResponseKind::Query, KillScan::Prepare { name, kill, text }) if whole => {
                // The server prepares a statement that does nothing under that name, so
                // that it knows the name as it would; its EXECUTE is Sluice's.
                self.kill_statements.insert(name, kill);
                let quoted = [b"'", STAND_IN, b"'"].concat();
                self.client.rewrite_front(len, |payload| {
                    let (start, end) = (1 + text.start, 1 + text.end);
                    [&payload[..start], &quoted[..], &payload[end..]].concat()
                });
                Action::Forward(request)
            }
            (ResponseKind::Query, KillScan::Unsupported(what)) => refused(what),
            (ResponseKind::Query, _) => refused("KILL in a statement text over 1 MiB"),
            // Drivers answer 1295 by running the statement as text, which Sluice handles.
            _ => Action::Refuse(ErrPacket::new(
                code::ER_UNSUPPORTED_PS,
                "HY000",
                "This command is not supported in the prepared statement protocol yet",
            )),
        })
    }

    /// `EXECUTE name` of an SQL prepared statement that holds a KILL: carried out as
    /// that KILL, with the server's answers when it can't be.
    /// `statements` and `uses`: what [`kill::name_uses`] found in the text.
    fn prepared_kill(&self, statements: usize, uses: &[kill::NameUse]) -> Option<Action> {
        uses.iter().find_map(|used| match used {
            kill::NameUse::Execute { name, using } => {
                let kill = self.kill_statements.get(name)?;
                Some(if statements > 1 {
                    refused("a prepared KILL executed in a multi-statement")
                } else if *using {
                    // KILL n takes no parameters.
                    Action::Refuse(ErrPacket::new(
                        code::ER_WRONG_ARGUMENTS,
                        "HY000",
                        "Incorrect arguments to EXECUTE",
                    ))
                } else {
                    Action::Kill(kill.clone())
                })
            }
            kill::NameUse::Forget(_) => None,
        })
    }

    /// KILLs opening a multi-statement, carried out in order as the server runs them:
    /// the first refused is the whole answer, as the server stops a multi-statement at
    /// its first error. Then the rest of the text goes to the server behind one stand-in
    /// per KILL, whose OKs (with more results to come) are the KILLs' own. Without the
    /// multi-statement option the server refuses the text unrun, and so nothing is
    /// carried out: only the first KILL is stood in for, as the server's error names
    /// what follows it.
    pub(super) async fn kill_leading(
        &mut self,
        kills: Vec<(Kill, usize)>,
        len: usize,
    ) -> Result<Leading, SessionError> {
        let count = match self.multi_statements {
            true => kills.len(),
            false => 1,
        };
        let Some(&(_, end)) = kills.get(count - 1) else {
            return Ok(Leading::Run(len));
        };
        if self.multi_statements {
            for (kill, _) in kills {
                let answer = match self.kill_answer(kill).await {
                    Ok(a) => a,
                    Err(e) => Answer::Refused(e.to_err_packet()),
                };
                if !matches!(answer, Answer::Ok { .. }) {
                    let seq = self.client.skip_packet().await?;
                    return Ok(Leading::Answered(self.answer_kill(seq, answer).await?));
                }
            }
        }
        let stand_ins = vec![STAND_IN; count].join(&b';');
        let len = self.client.rewrite_front(len, |payload| {
            [&payload[..1], &stand_ins[..], &payload[1 + end..]].concat()
        });
        Ok(Leading::Run(len))
    }

    /// Carries out a KILL (the command is still at the front of the client buffer).
    /// Returns whether the session goes on.
    pub(super) async fn kill(&mut self, kill: Kill) -> Result<bool, SessionError> {
        let seq = self.client.skip_packet().await?;
        let answer = match self.kill_answer(kill).await {
            Ok(a) => a,
            Err(e) => Answer::Refused(e.to_err_packet()),
        };
        self.answer_kill(seq, answer).await
    }

    /// Writes a KILL's answer. Returns whether the session goes on.
    async fn answer_kill(&mut self, seq: u8, answer: Answer) -> Result<bool, SessionError> {
        // A KILL changes nothing of the session that tracking would report (the flag
        // may be left from the last statement's OK on Sluice's connection).
        let status = StatusFlags(self.last_status().0 & !StatusFlags::SESSION_STATE_CHANGED);
        match answer {
            Answer::Ok { killed } => {
                let ok = OkPacket {
                    affected_rows: killed,
                    status,
                    ..Default::default()
                };
                self.client.write_ok(seq, &ok).await?;
                Ok(true)
            }
            Answer::Refused(err) => {
                self.client.write_err(seq, &err).await?;
                Ok(true)
            }
            Answer::EndSelf(err) => {
                match err {
                    Some(err) => self.client.write_err(seq, &err).await?,
                    None => {
                        let ok = OkPacket {
                            status,
                            ..Default::default()
                        };
                        self.client.write_ok(seq, &ok).await?
                    }
                }
                // As the server does for its own connection: what the session held is
                // not given back as it is.
                if let Some(b) = self.backing.conn_mut() {
                    b.mark_broken();
                }
                Ok(false)
            }
        }
    }

    async fn kill_answer(&mut self, kill: Kill) -> Result<Answer, BackendError> {
        match kill.target {
            KillTarget::Session(id) => self.kill_session(id, kill.query_only).await,
            KillTarget::QueryId(q) => self.kill_query_id(q).await,
            KillTarget::CurrentUser => {
                let name = self.user.name.clone();
                self.kill_user(&name, None, kill.query_only).await
            }
            KillTarget::User { name, host } => {
                self.kill_user(&name, host.as_deref(), kill.query_only)
                    .await
            }
        }
    }

    async fn kill_session(&mut self, id: u64, query_only: bool) -> Result<Answer, BackendError> {
        if let Some(answer) = self.kill_on_peer(id, query_only).await? {
            return Ok(answer);
        }
        let target = u32::try_from(id)
            .ok()
            .and_then(|id| Some((id, self.fe.sessions.lock().get(&id).cloned()?)));
        let Some((id, target)) = target else {
            return Ok(Answer::Refused(unknown_thread(id)));
        };
        if id == self.id {
            return Ok(if query_only {
                Answer::Refused(ErrPacket::new(
                    code::ER_QUERY_INTERRUPTED,
                    "70100",
                    "Query execution was interrupted",
                ))
            } else {
                Answer::EndSelf(Some(ErrPacket::new(
                    code::ER_CONNECTION_KILLED,
                    "70100",
                    "Connection was killed",
                )))
            });
        }
        if target.user != self.user.name && !self.may_kill_others().await? {
            return Ok(Answer::Refused(ErrPacket::new(
                code::ER_KILL_DENIED_ERROR,
                "HY000",
                format!("You are not owner of thread {id}"),
            )));
        }
        self.end_session(&target, query_only).await?;
        Ok(Answer::Ok { killed: 0 })
    }

    /// KILL of a session id another instance of the fleet gave: carried out there, on
    /// this session's behalf. None: the id is this instance's.
    async fn kill_on_peer(
        &mut self,
        id: u64,
        query_only: bool,
    ) -> Result<Option<Answer>, BackendError> {
        let Some(fleet) = self.fe.fleet.get().cloned() else {
            return Ok(None);
        };
        let Ok(id) = u32::try_from(id) else {
            return Ok(None);
        };
        let slot = crate::fleet::slot_of(id);
        if fleet.slot().is_none_or(|mine| mine == slot) {
            return Ok(None);
        }
        if fleet.peer(slot).is_none() {
            return Ok(Some(Answer::Refused(unknown_thread(u64::from(id)))));
        }
        let request = crate::fleet::Request::Kill {
            target: crate::fleet::KillTarget::Session(id),
            query_only,
            user: self.user.name.clone(),
            privileged: self.may_kill_others().await?,
        };
        let replies = fleet.ask(Some(slot), request, PEER_WAIT).await;
        Ok(Some(match replies.first().map(|(_, r)| r) {
            Some(crate::fleet::Reply::Killed { .. }) => Answer::Ok { killed: 0 },
            Some(crate::fleet::Reply::Denied) => Answer::Refused(ErrPacket::new(
                code::ER_KILL_DENIED_ERROR,
                "HY000",
                format!("You are not owner of thread {id}"),
            )),
            _ => Answer::Refused(unknown_thread(u64::from(id))),
        }))
    }

    /// `KILL [QUERY] USER`: every session of the account. As on the server, sessions the
    /// killer may not kill are passed over without an error, and the killer's own
    /// session, if it is one of them, ends after the answer.
    async fn kill_user(
        &mut self,
        name: &str,
        host: Option<&str>,
        query_only: bool,
    ) -> Result<Answer, BackendError> {
        if name != self.user.name && !self.may_kill_others().await? {
            return Ok(Answer::Ok { killed: 0 });
        }
        let targets: Vec<(u32, SessionEntry)> = self
            .fe
            .sessions
            .lock()
            .iter()
            .filter(|(_, e)| e.user == name && host.is_none_or(|h| host_matches(h, &e.client)))
            .map(|(id, e)| (*id, e.clone()))
            .collect();
        let mut killed = 0;
        let mut me = false;
        for (id, target) in &targets {
            if *id == self.id {
                me = true;
            } else {
                self.end_session(target, query_only).await?;
            }
            killed += 1;
        }
        if let Some(fleet) = self.fe.fleet.get().cloned() {
            let request = crate::fleet::Request::Kill {
                target: crate::fleet::KillTarget::User {
                    name: name.to_owned(),
                    host: host.map(str::to_owned),
                },
                query_only,
                user: self.user.name.clone(),
                // Asked above when the account is another's.
                privileged: name != self.user.name,
            };
            for (_, reply) in fleet.ask(None, request, PEER_WAIT).await {
                if let crate::fleet::Reply::Killed { count } = reply {
                    killed += count;
                }
            }
        }
        Ok(if me && !query_only {
            Answer::EndSelf(None)
        } else {
            Answer::Ok { killed }
        })
    }

    /// `KILL QUERY ID n`: query ids are the server's, so the server says which thread
    /// runs it; only a thread one of Sluice's sessions holds is acted on.
    async fn kill_query_id(&mut self, query_id: u64) -> Result<Answer, BackendError> {
        let sql =
            format!("SELECT ID FROM information_schema.PROCESSLIST WHERE QUERY_ID = {query_id}");
        let routers = self.fe.routers();
        for pool in routers.iter().flat_map(|r| r.pools()) {
            let key = self.key(&self.user);
            let Ok(mut conn) = pool.lease(&key, None).await else {
                continue;
            };
            let thread = conn.query_scalar(&sql).await.refused_as_none()?;
            let Some(thread) = thread.flatten() else {
                continue;
            };
            let Some(thread) = std::str::from_utf8(&thread)
                .ok()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            let server = pool.server.name.clone();
            let owner = self.fe.sessions.lock().iter().find_map(|(id, e)| {
                (e.live.attached()
                    && e.live.thread_id() == thread
                    && e.live.server_name().as_deref() == Some(&server))
                .then_some(*id)
            });
            if let Some(id) = owner {
                return self.kill_session(u64::from(id), true).await;
            }
            if let Some(answer) = self.kill_thread_on_peer(&server, thread).await? {
                return Ok(answer);
            }
        }
        Ok(Answer::Refused(ErrPacket::new(
            code::ER_NO_SUCH_QUERY,
            "HY000",
            format!("Unknown query id: {query_id}"),
        )))
    }

    /// `KILL QUERY ID` of a statement a peer's session runs on `server`'s `thread`.
    async fn kill_thread_on_peer(
        &mut self,
        server: &str,
        thread: u32,
    ) -> Result<Option<Answer>, BackendError> {
        let Some(fleet) = self.fe.fleet.get().cloned() else {
            return Ok(None);
        };
        if fleet.peers().is_empty() {
            return Ok(None);
        }
        let request = crate::fleet::Request::Kill {
            target: crate::fleet::KillTarget::Thread {
                server: server.to_owned(),
                thread,
            },
            query_only: true,
            user: self.user.name.clone(),
            privileged: self.may_kill_others().await?,
        };
        let replies = fleet.ask(None, request, PEER_WAIT).await;
        Ok(replies.into_iter().find_map(|(_, reply)| match reply {
            crate::fleet::Reply::Killed { .. } => Some(Answer::Ok { killed: 0 }),
            crate::fleet::Reply::Denied => Some(Answer::Refused(ErrPacket::new(
                code::ER_KILL_DENIED_ERROR,
                "HY000",
                format!("You are not owner of thread {thread}"),
            ))),
            _ => None,
        }))
    }

    /// Asks the server whether this session's account holds the privilege to kill
    /// others' sessions.
    async fn may_kill_others(&mut self) -> Result<bool, BackendError> {
        let answer = match self.backing.conn_mut() {
            Some(b) => b.query_scalar(PRIVILEGE_CHECK).await.refused_as_none()?,
            None => {
                let key = match self.backing.is_multiplexed() {
                    true => self.mux_key(&self.user),
                    false => self.key(&self.user),
                };
                let router = self.fe.router.load_full();
                let (mut conn, _) = router
                    .lease(&Target::Writer, &[], &key, None, |_| 0, 0)
                    .await?;
                let answer = conn.query_scalar(PRIVILEGE_CHECK).await.refused_as_none()?;
                conn.release();
                answer
            }
        };
        Ok(match answer {
            Some(Some(n)) => n != b"0",
            // The check itself refused (no access to information_schema): not privileged.
            _ => false,
        })
    }

    /// Ends another session (or only its statement in flight).
    async fn end_session(
        &mut self,
        target: &SessionEntry,
        query_only: bool,
    ) -> Result<(), BackendError> {
        let own_thread = self.backing.conn().map(|b| b.thread_id);
        stop_session(&self.fe, target, query_only, self.params(false), own_thread).await
    }
}

/// Ends a session of this instance (or only its statement in flight), for a KILL made
/// here (`own_thread`: the killer's connection, if it holds one) or by a peer.
pub(crate) async fn stop_session(
    fe: &crate::frontend::Frontend,
    target: &SessionEntry,
    query_only: bool,
    params: crate::backend::ConnParams,
    own_thread: Option<u32>,
) -> Result<(), BackendError> {
    if !query_only {
        // A session between statements ends at once; one in a statement, once the
        // statement is stopped below, without a word of its answer, as the server
        // closes a killed connection.
        target.live.kill();
        target.kill.notify_one();
    }
    if !target.live.attached() {
        return Ok(());
    }
    let thread = target.live.thread_id();
    if target.multiplexed && own_thread == Some(thread) {
        // The connection it last used is the killer's now: nothing of it runs.
        return Ok(());
    }
    // A multiplexed session's connection goes back to the pool after the statement:
    // only its statement is stopped, and the session, told above, ends by itself.
    let sql = match query_only || target.multiplexed {
        true => format!("KILL QUERY {thread}"),
        false => format!("KILL {thread}"),
    };
    let server = target.live.server_name().unwrap_or_default();
    let routers = fe.routers();
    let Some(pool) = routers
        .iter()
        .flat_map(|r| r.pools())
        .find(|p| p.server.name == server)
    else {
        return Ok(());
    };
    // Sluice's own right to stop its connection: the backend login that opened it.
    let key = crate::backend::PoolKey::new(target.login.clone(), params);
    let mut conn = pool.lease(&key, None).await?;
    match conn.simple_query(&sql).await {
        Ok(_) => Ok(()),
        // It finished (or its connection closed) meanwhile: nothing left to stop.
        Err(Failed::Answered(e)) if e.code == code::ER_NO_SUCH_THREAD => Ok(()),
        Err(Failed::Broken(e)) => Err(e),
        Err(Failed::Answered(e)) => {
            tracing::warn!(code = e.code, "KILL of a session's backend thread refused");
            Ok(())
        }
    }
}

/// MySQL's host pattern match (`%` any run, `_` one character) against the client's
/// address (`localhost` over the socket), as `KILL USER 'u'@'host'` names accounts by host.
pub(crate) fn host_matches(pattern: &str, client: &crate::stream::Peer) -> bool {
    let host = client.host();
    like(pattern.as_bytes(), host.as_bytes())
        || (pattern.eq_ignore_ascii_case("localhost") && client.ip().is_loopback())
}

fn like(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| like(rest, &s[i..])),
        Some((b'_', rest)) => !s.is_empty() && like(rest, &s[1..]),
        Some((c, rest)) => {
            s.first().is_some_and(|b| b.eq_ignore_ascii_case(c)) && like(rest, &s[1..])
        }
    }
}

/// A KILL form Sluice can't carry out as the server would.
fn refused(what: &str) -> Action {
    Action::Refuse(ErrPacket::new(
        code::ER_NOT_SUPPORTED_YET,
        "42000",
        format!("This version of MariaDB doesn't yet support '{what} through Sluice'"),
    ))
}

/// MySQL's answer to KILL of a connection id it does not know.
pub(super) fn unknown_thread(id: u64) -> ErrPacket {
    ErrPacket::new(
        code::ER_NO_SUCH_THREAD,
        "HY000",
        format!("Unknown thread id: {id}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let c = crate::stream::Peer::Tcp("127.0.0.1:5000".parse().unwrap());
        assert!(host_matches("%", &c));
        assert!(host_matches("127.0.0.%", &c));
        assert!(host_matches("localhost", &c));
        assert!(host_matches("127.0.0._", &c));
        assert!(!host_matches("10.%", &c));
        let local = crate::stream::Peer::Local;
        assert!(host_matches("localhost", &local) && host_matches("%", &local));
        assert!(!host_matches("127.0.0.1", &local));
    }
}
