//! Which session a log line is about. Every line a session's task logs names the
//! session's id and client, as a `session{id, client}` span would; a span, though, keeps
//! about 400 bytes in the log subscriber's registry for as long as the session lives
//! (its slot, its formatted fields, their map), which is most of what an idle client
//! costs beyond its own state. The tag lives in the session's task instead, and the
//! log's formatter reads it only when a line is written.

use crate::stream::Peer;
use std::fmt;
use std::future::Future;
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

tokio::task_local! {
    static SESSION: SessionTag;
}

/// The session a task serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTag {
    /// Its connection id, as `CONNECTION_ID()` and the admin API show it.
    pub id: u32,
    pub client: Peer,
}

/// `session`, with `tag` as the session its log lines name. Not an async fn: that would
/// keep a second copy of the session's whole future in its own.
pub fn tagged<F: Future>(tag: SessionTag, session: F) -> impl Future<Output = F::Output> {
    SESSION.scope(tag, session)
}

/// The session whose task is logging, if a session's is.
pub fn current() -> Option<SessionTag> {
    SESSION.try_with(|tag| *tag).ok()
}

/// Text lines: the event's fields, then the session's as two more (`session=7
/// client=10.0.0.5:51234`), wrapping the subscriber's own field format.
#[derive(Debug, Default)]
pub struct TaggedFields<N>(pub N);

impl<'w, N: for<'a> FormatFields<'a>> FormatFields<'w> for TaggedFields<N> {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        self.0.format_fields(writer.by_ref(), fields)?;
        match current() {
            Some(tag) => write!(writer, " session={} client={}", tag.id, tag.client),
            None => Ok(()),
        }
    }
}

/// JSON lines: a `"session": {"id": 7, "client": "10.0.0.5:51234"}` member first,
/// wrapping the subscriber's own event format (which writes the event's fields itself).
#[derive(Debug, Default)]
pub struct TaggedJson<E>(pub E);

impl<S, N, E> FormatEvent<S, N> for TaggedJson<E>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    E: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(tag) = current() else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let Some(members) = line.strip_prefix('{') else {
            return writer.write_str(&line);
        };
        let client = serde_json::to_string(&tag.client.to_string()).map_err(|_| fmt::Error)?;
        let comma = if members.starts_with('}') { "" } else { "," };
        write!(
            writer,
            "{{\"session\":{{\"id\":{},\"client\":{client}}}{comma}{members}",
            tag.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_task_names_its_session_and_no_other_task_does() {
        let tag = SessionTag {
            id: 7,
            client: Peer::Tcp("127.0.0.1:5000".parse().unwrap()),
        };
        assert_eq!(current(), None);
        let inside = tagged(tag, async {
            tokio::task::yield_now().await;
            let other = tokio::spawn(async { current() }).await.unwrap();
            (current(), other)
        })
        .await;
        assert_eq!(inside, (Some(tag), None));
        assert_eq!(current(), None);
    }

    /// Lines a subscriber wrote, for the formatters' tests.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Logs one line outside any session, then one inside session 7's task.
    fn log_both(subscriber: impl Subscriber + Send + Sync + 'static) {
        let _default = tracing::subscriber::set_default(subscriber);
        tracing::warn!(error = "gone", "outside");
        let tag = SessionTag {
            id: 7,
            client: Peer::Tcp("10.0.0.5:51234".parse().unwrap()),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(tagged(tag, async {
            tracing::warn!(error = "lost", "closing session");
        }));
    }

    #[test]
    fn a_text_line_names_its_session_after_its_own_fields() {
        let lines = Lines::default();
        let writer = lines.clone();
        log_both(
            tracing_subscriber::fmt()
                .with_ansi(false)
                .fmt_fields(TaggedFields(
                    tracing_subscriber::fmt::format::DefaultFields::new(),
                ))
                .with_writer(move || writer.clone())
                .finish(),
        );
        let text = lines.text();
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 2, "{text}");
        assert!(got[0].ends_with("outside error=\"gone\""), "{text}");
        assert!(
            got[1].ends_with("closing session error=\"lost\" session=7 client=10.0.0.5:51234"),
            "{text}"
        );
    }

    #[test]
    fn a_json_line_names_its_session_in_a_member_of_its_own() {
        let lines = Lines::default();
        let writer = lines.clone();
        log_both(
            tracing_subscriber::fmt()
                .json()
                .event_format(TaggedJson(tracing_subscriber::fmt::format().json()))
                .with_writer(move || writer.clone())
                .finish(),
        );
        let text = lines.text();
        let got: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(got.len(), 2, "{text}");
        assert_eq!(got[0].get("session"), None, "{text}");
        assert_eq!(got[0]["fields"]["message"], "outside");
        assert_eq!(
            got[1]["session"],
            serde_json::json!({"id": 7, "client": "10.0.0.5:51234"})
        );
        assert_eq!(got[1]["fields"]["error"], "lost");
        assert_eq!(got[1]["level"], "WARN");
    }
}
