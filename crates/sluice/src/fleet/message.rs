//! What instances of a fleet tell each other, as JSON through the coordination engine
//! (an etcd key or a table on the writer): changes every instance applies, and
//! requests one instance answers.

use crate::admin::Invalidate;
use serde::{Deserialize, Serialize};

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
}
