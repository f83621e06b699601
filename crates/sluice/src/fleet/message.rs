//! What instances of a fleet tell each other, as JSON through the coordination engine
//! (an etcd key or a table on the writer): changes every instance applies, and
//! requests one instance answers. With a key, each goes in a signed envelope
//! ([`Seal`]): `{"at": <unix ms>, "sig": "<hex HMAC-SHA256>", "body": <the message>}`.

use crate::admin::Invalidate;
use crate::secret::Secret;
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::Sha256;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A runtime change made through one instance's admin API, applied by every other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// The cache rules, as `PUT /v1/cache/rules` took them.
    CacheRules {
        rules: serde_json::Value,
    },
    Invalidate {
        what: Invalidate,
    },
    /// A server enabled, disabled or drained.
    Server {
        name: String,
        state: ServerState,
    },
    /// The writer an instance promoted or switched over to: where every instance sends
    /// writes, whatever else looks writable.
    Writer {
        name: String,
    },
    /// A switchover another instance ran ended (to the writer named, or not at all):
    /// writes held for it go on.
    SwitchoverEnded {
        to: Option<String>,
    },
}

impl Change {
    /// The shared state entry this change replaces, for changes a newcomer must find
    /// (the rules in force, a server's state, the writer); events have none.
    pub fn state_key(&self) -> Option<String> {
        match self {
            Change::CacheRules { .. } => Some("cache_rules".into()),
            Change::Server { name, .. } => Some(format!("server:{name}")),
            Change::Writer { .. } => Some("writer".into()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Enabled,
    Disabled,
    Drained,
}

/// A request to one instance (`to`), or to all (`to` = None).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// KILL of sessions held there, on behalf of `user` (`privileged`: holds CONNECTION
    /// ADMIN or SUPER on the server, as the asking instance checked).
    Kill {
        target: KillTarget,
        query_only: bool,
        user: String,
        privileged: bool,
    },
    /// A switchover away from `from` begins: hold new writes, and answer once what runs
    /// there has ended (or `timeout_ms` passed). They go on at `SwitchoverEnded`, or
    /// after twice the timeout if it never comes.
    PauseWrites { from: String, timeout_ms: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    Session(u32),
    User {
        name: String,
        host: Option<String>,
    },
    /// The session whose statement runs on this server thread.
    Thread {
        server: String,
        thread: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// Done: how many sessions it acted on.
    Killed { count: u64 },
    /// The session is there, and the asker may not kill it.
    Denied,
    /// Nothing there by that id.
    Unknown,
    /// Writes held; `drained`: nothing runs on the old writer any more.
    Paused { drained: bool },
}

/// One message as it travels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    Change {
        origin: u32,
        change: Change,
    },
    Request {
        origin: u32,
        to: Option<u32>,
        id: u64,
        request: Request,
    },
    Reply {
        origin: u32,
        to: u32,
        id: u64,
        reply: Reply,
    },
}

impl Message {
    pub fn origin(&self) -> u32 {
        match self {
            Message::Change { origin, .. }
            | Message::Request { origin, .. }
            | Message::Reply { origin, .. } => *origin,
        }
    }
}

/// How far a message's send time may be from the reader's clock: a signed message
/// copied back into the log later than this is refused, so the fleet's clocks must
/// agree this well.
pub const REPLAY_BOUND: Duration = Duration::from_secs(300);
/// Rejections are counted each, and logged once in this long at most: whoever can
/// write the log could otherwise fill the log file.
const WARN_EVERY: Duration = Duration::from_secs(60);

type HmacSha256 = Hmac<Sha256>;

/// Where a message was read from, which sets how old it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// As it was sent: at most [`REPLAY_BOUND`] from now either way.
    Log,
    /// A shared state entry, read when joining: as old as the change that set it (not
    /// from the future, though).
    State,
}

/// Why a message was dropped unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No signature, where one is required (an instance without the key, or an older
    /// version, wrote it).
    Unsigned,
    /// Signed with another key, or changed since.
    BadSignature,
    /// Sent further from now than [`REPLAY_BOUND`].
    Stale,
}

impl Reason {
    pub const ALL: [Reason; 3] = [Reason::Unsigned, Reason::BadSignature, Reason::Stale];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unsigned => "unsigned",
            Reason::BadSignature => "bad_signature",
            Reason::Stale => "stale",
        }
    }
}

/// A message dropped, with the slot it claims to come from (when that much is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub reason: Reason,
    pub origin: Option<u32>,
}

/// Signs what this instance sends and checks what it reads, with the fleet's key.
pub struct Seal {
    mac: Option<HmacSha256>,
    /// `fleet.name`, signed too: a message of one fleet copied into another's log
    /// (same servers, same key) does not pass there.
    fleet: String,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    at: u64,
    sig: String,
    #[serde(borrow)]
    body: &'a RawValue,
}

/// Just the origin of a message not otherwise trusted, for the log line.
#[derive(Deserialize)]
struct Origin {
    origin: u32,
}

fn claimed_origin(body: &str) -> Option<u32> {
    serde_json::from_str::<Origin>(body).ok().map(|o| o.origin)
}

impl Seal {
    /// None: messages go unsigned, and are taken signed or not.
    pub fn new(key: Option<&Secret>, fleet: &str) -> Seal {
        Seal {
            mac: key.and_then(|k| HmacSha256::new_from_slice(k.0.as_bytes()).ok()),
            fleet: fleet.to_owned(),
        }
    }

    /// The HMAC of a body sent at `at`: the fleet's name, the time and the body's
    /// exact bytes, each part unambiguous (the name has no newline, the time is digits).
    fn mac(&self, at: u64, body: &str) -> Option<HmacSha256> {
        let mut mac = self.mac.clone()?;
        mac.update(b"sluice fleet v1\n");
        mac.update(self.fleet.as_bytes());
        mac.update(b"\n");
        mac.update(at.to_string().as_bytes());
        mac.update(b"\n");
        mac.update(body.as_bytes());
        Some(mac)
    }

    /// The text to write for `m`, sent at `at` (unix ms): the message itself without a
    /// key (as older versions wrote it, and read it), else the signed envelope.
    pub fn seal(&self, m: &Message, at: u64) -> Result<String, String> {
        let body = ascii(serde_json::to_string(m).map_err(|e| e.to_string())?);
        let Some(mac) = self.mac(at, &body) else {
            return Ok(body);
        };
        let sig = hex::encode(mac.finalize().into_bytes());
        Ok(format!("{{\"at\":{at},\"sig\":\"{sig}\",\"body\":{body}}}"))
    }

    /// The message in `raw`, checked against the key when there is one. `Ok(None)`: a
    /// message this version does not read (a newer one's), passed over as before.
    pub fn open(&self, raw: &[u8], now: u64, read: Read) -> Result<Option<Message>, Refused> {
        let text = std::str::from_utf8(raw).unwrap_or_default();
        let Ok(envelope) = serde_json::from_str::<Envelope>(text) else {
            return match self.mac {
                Some(_) => Err(Refused {
                    reason: Reason::Unsigned,
                    origin: claimed_origin(text),
                }),
                None => Ok(serde_json::from_str(text).ok()),
            };
        };
        let body = envelope.body.get();
        if let Some(mac) = self.mac(envelope.at, body) {
            let refused = |reason| Refused {
                reason,
                origin: claimed_origin(body),
            };
            let sig = hex::decode(envelope.sig).map_err(|_| refused(Reason::BadSignature))?;
            mac.verify_slice(&sig)
                .map_err(|_| refused(Reason::BadSignature))?;
            let bound = REPLAY_BOUND.as_millis() as u64;
            let fresh = match read {
                Read::Log => envelope.at.abs_diff(now) <= bound,
                Read::State => envelope.at <= now.saturating_add(bound),
            };
            if !fresh {
                return Err(refused(Reason::Stale));
            }
        }
        Ok(serde_json::from_str(body).ok())
    }
}

/// JSON with every non-ASCII character escaped: the bytes signed are the bytes read
/// back, whatever character set the fleet's tables got on the server (latin1 would
/// turn other characters into '?'). serde_json writes such characters only inside
/// strings, where a `\u` escape of its UTF-16 code units means the same.
fn ascii(json: String) -> String {
    if json.is_ascii() {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// Messages dropped, by reason.
#[derive(Default)]
pub struct Rejections {
    counts: [AtomicU64; Reason::ALL.len()],
    warned: Mutex<Option<Instant>>,
}

impl Rejections {
    pub fn record(&self, refused: &Refused, read: Read) {
        self.counts[refused.reason as usize].fetch_add(1, Ordering::Relaxed);
        let mut warned = self.warned.lock();
        if warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *warned = Some(Instant::now());
        let origin = refused
            .origin
            .map_or_else(|| "unknown".to_owned(), |o| o.to_string());
        let what = match read {
            Read::Log => "message",
            Read::State => "shared state entry",
        };
        tracing::warn!(
            origin = %origin,
            reason = refused.reason.as_str(),
            "a fleet {what} was dropped unread (unsigned, signed with another key, or too \
             old): do all instances have the same [fleet] secret (or admin token), and \
             clocks within 5 minutes of each other? (said once a minute at most; \
             sluice_fleet_messages_rejected_total counts each)"
        );
    }

    pub fn count(&self, reason: Reason) -> u64 {
        self.counts[reason as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_survive_the_trip() {
        let all = [
            Message::Change {
                origin: 1,
                change: Change::Invalidate {
                    what: Invalidate::Table {
                        schema: "s".into(),
                        table: "t".into(),
                    },
                },
            },
            Message::Request {
                origin: 0,
                to: Some(2),
                id: 7,
                request: Request::Kill {
                    target: KillTarget::User {
                        name: "app".into(),
                        host: None,
                    },
                    query_only: true,
                    user: "root".into(),
                    privileged: true,
                },
            },
            Message::Reply {
                origin: 2,
                to: 0,
                id: 7,
                reply: Reply::Killed { count: 3 },
            },
        ];
        for m in all {
            let text = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), m, "{text}");
        }
    }

    #[test]
    fn state_changes_replace_their_entry_and_events_have_none() {
        let rules = Change::CacheRules {
            rules: serde_json::json!([]),
        };
        assert_eq!(rules.state_key().as_deref(), Some("cache_rules"));
        let server = Change::Server {
            name: "db2".into(),
            state: ServerState::Drained,
        };
        assert_eq!(server.state_key().as_deref(), Some("server:db2"));
        assert_eq!(
            Change::Invalidate {
                what: Invalidate::All
            }
            .state_key(),
            None
        );
    }

    const NOW: u64 = 1_700_000_000_000;

    fn change() -> Message {
        Message::Change {
            origin: 3,
            change: Change::CacheRules {
                rules: serde_json::json!([{ "name": "r", "match": "^SELECT 'é😀'", "ttl": "1s" }]),
            },
        }
    }

    fn seal(key: Option<&str>) -> Seal {
        Seal::new(key.map(|k| Secret(k.into())).as_ref(), "sluice")
    }

    fn refused(reason: Reason) -> Result<Option<Message>, Refused> {
        Err(Refused {
            reason,
            origin: Some(3),
        })
    }

    #[test]
    fn a_signed_message_survives_the_trip_in_ascii() {
        let key = seal(Some("k"));
        let text = key.seal(&change(), NOW).unwrap();
        assert!(text.is_ascii(), "{text}");
        assert!(
            text.starts_with(&format!("{{\"at\":{NOW},\"sig\":\"")),
            "{text}"
        );
        for read in [Read::Log, Read::State] {
            assert_eq!(key.open(text.as_bytes(), NOW, read), Ok(Some(change())));
        }
        // Within the bound either way.
        assert_eq!(
            key.open(text.as_bytes(), NOW + 299_000, Read::Log),
            Ok(Some(change()))
        );
        assert_eq!(
            key.open(text.as_bytes(), NOW - 299_000, Read::Log),
            Ok(Some(change()))
        );
    }

    #[test]
    fn a_changed_body_or_time_fails() {
        let key = seal(Some("k"));
        let text = key.seal(&change(), NOW).unwrap();
        let tampered = text.replace("\"1s\"", "\"1h\"");
        assert_ne!(tampered, text);
        assert_eq!(
            key.open(tampered.as_bytes(), NOW, Read::Log),
            refused(Reason::BadSignature)
        );
        let moved = text.replace(&NOW.to_string(), &(NOW + 1).to_string());
        assert_eq!(
            key.open(moved.as_bytes(), NOW, Read::Log),
            refused(Reason::BadSignature)
        );
        // Whitespace is part of the bytes signed.
        let spaced = text.replacen("\"change\":", "\"change\": ", 1);
        assert_eq!(
            key.open(spaced.as_bytes(), NOW, Read::Log),
            refused(Reason::BadSignature)
        );
        for sig in ["zz", "abc", "", "+f"] {
            let bad = format!("{{\"at\":{NOW},\"sig\":\"{sig}\",\"body\":{{\"origin\":3}}}}");
            assert_eq!(
                key.open(bad.as_bytes(), NOW, Read::Log),
                refused(Reason::BadSignature),
                "{bad}"
            );
        }
    }

    #[test]
    fn another_key_or_fleet_fails() {
        let text = seal(Some("k")).seal(&change(), NOW).unwrap();
        assert_eq!(
            seal(Some("other")).open(text.as_bytes(), NOW, Read::Log),
            refused(Reason::BadSignature)
        );
        let other_fleet = Seal::new(Some(&Secret("k".into())), "billing");
        assert_eq!(
            other_fleet.open(text.as_bytes(), NOW, Read::Log),
            refused(Reason::BadSignature)
        );
    }

    #[test]
    fn an_old_message_fails_in_the_log_not_in_the_state() {
        let key = seal(Some("k"));
        let old = key.seal(&change(), NOW - 301_000).unwrap();
        assert_eq!(
            key.open(old.as_bytes(), NOW, Read::Log),
            refused(Reason::Stale)
        );
        // The shared state holds the change that set it, however long ago.
        assert_eq!(
            key.open(old.as_bytes(), NOW, Read::State),
            Ok(Some(change()))
        );
        let ahead = key.seal(&change(), NOW + 301_000).unwrap();
        for read in [Read::Log, Read::State] {
            assert_eq!(
                key.open(ahead.as_bytes(), NOW, read),
                refused(Reason::Stale)
            );
        }
    }

    #[test]
    fn unsigned_messages_pass_only_without_a_key() {
        let none = seal(None);
        let plain = none.seal(&change(), NOW).unwrap();
        // What older versions write and read.
        assert_eq!(serde_json::from_str::<Message>(&plain).unwrap(), change());
        assert_eq!(
            none.open(plain.as_bytes(), NOW, Read::Log),
            Ok(Some(change()))
        );
        assert_eq!(
            seal(Some("k")).open(plain.as_bytes(), NOW, Read::Log),
            refused(Reason::Unsigned)
        );
        // Without a key, a signed one is taken too (nothing is checked).
        let signed = seal(Some("k")).seal(&change(), NOW - 3_600_000).unwrap();
        assert_eq!(
            none.open(signed.as_bytes(), NOW, Read::Log),
            Ok(Some(change()))
        );
        // Nothing readable: no origin to name, and no panic.
        for junk in [&b"\xff\xfe"[..], b"", b"{\"at\":-1}", b"[]"] {
            assert_eq!(
                seal(Some("k")).open(junk, NOW, Read::Log),
                Err(Refused {
                    reason: Reason::Unsigned,
                    origin: None
                })
            );
            assert_eq!(none.open(junk, NOW, Read::Log), Ok(None));
        }
    }

    #[test]
    fn a_signed_message_of_a_newer_version_is_passed_over() {
        let key = seal(Some("k"));
        let body = r#"{"kind":"future","origin":3}"#;
        let mac = key.mac(NOW, body).unwrap().finalize().into_bytes();
        let sig = hex::encode(mac);
        let text = format!("{{\"at\":{NOW},\"sig\":\"{sig}\",\"body\":{body}}}");
        assert_eq!(key.open(text.as_bytes(), NOW, Read::Log), Ok(None));
    }

    #[test]
    fn rejections_are_counted_by_reason() {
        let r = Rejections::default();
        let stale = Refused {
            reason: Reason::Stale,
            origin: Some(1),
        };
        r.record(&stale, Read::Log);
        r.record(&stale, Read::State);
        assert_eq!(r.count(Reason::Stale), 2);
        assert_eq!(r.count(Reason::Unsigned), 0);
    }
}
