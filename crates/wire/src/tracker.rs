//! Where a response ends, without decoding rows.
//!
//! [`ResponseTracker`] is the state machine of one command's response, fed the first
//! bytes of each logical packet. [`Scanner`] walks a byte stream chunk by chunk, feeds
//! the tracker, and tells the proxy how many bytes it may forward right now — so a
//! result of any size streams through a fixed-size buffer.

use crate::command::Command;
use crate::lenenc::Reader;
use crate::packet::{Header, HEADER_LEN};
use crate::response::{
    terminator, terminator_status, OkPacket, EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER,
};
use crate::{CapabilityFlags, ProtocolError, StatusFlags};

/// How many payload bytes of a packet the tracker needs to see: enough for an OK packet
/// up to its warnings (1 + 9 + 9 + 2 + 2) and for the prepare-OK header (12).
pub const HEAD_NEEDED: usize = 23;

/// The shape of the response a command gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseKind {
    /// No response at all (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA).
    None,
    /// Exactly one packet (OK, ERR, EOF or the COM_STATISTICS string).
    Single,
    /// Text result sets, OK or ERR, possibly several, possibly a LOCAL INFILE request.
    Query,
    /// Binary result sets; with `cursor`, only metadata until COM_STMT_FETCH.
    Execute { cursor: bool },
    /// Prepare-OK followed by parameter and column definitions.
    Prepare,
    /// Rows of an open cursor.
    Fetch,
    /// Column definitions terminated like rows.
    FieldList,
}

impl ResponseKind {
    /// The response shape for a command whose payload starts with `head`.
    pub fn of(command: Command, head: &[u8]) -> ResponseKind {
        use Command::*;
        match command {
            Query => ResponseKind::Query,
            StmtExecute => {
                // Payload: command, statement id (4), flags (1). Any cursor type opens one.
                let flags = head.get(5).copied().unwrap_or(0);
                ResponseKind::Execute { cursor: flags != 0 }
            }
            StmtPrepare => ResponseKind::Prepare,
            StmtFetch => ResponseKind::Fetch,
            FieldList => ResponseKind::FieldList,
            StmtClose | StmtSendLongData => ResponseKind::None,
            _ => ResponseKind::Single,
        }
    }
}

/// What the packet just fed means for the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Continue,
    /// The response is complete. The status is that of the final OK/EOF, if it had one.
    Done(Option<StatusFlags>),
    /// The server asks the client for a local file; the client's file packets follow,
    /// then the response continues.
    LocalInfile,
}

/// A packet inside a text result set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultPart {
    Column,
    Row,
}

/// States of a response, in the order they are passed through.
///
/// `First` → (OK or ERR: done, or `First` again when more results exist)
///         → `Columns` → `ColumnsEof` (only without `CLIENT_DEPRECATE_EOF`) → `Rows`
///         → terminator: `First` when more results exist, otherwise done.
/// Prepare: `Prepared` → `Params` → `ParamsEof` → `PrepColumns` → `PrepColumnsEof` → done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    First,
    Columns { left: u64 },
    ColumnsEof,
    Rows,
    Prepared,
    Params { left: u16, columns: u16 },
    ParamsEof { columns: u16 },
    PrepColumns { left: u16 },
    PrepColumnsEof,
    Single,
    Done,
}

#[derive(Clone, Debug)]
pub struct ResponseTracker {
    state: State,
    deprecate_eof: bool,
    kind: ResponseKind,
    /// What the response did, for statistics: counted as packets pass, never decoded.
    outcome: Outcome,
}

/// What a response did: rows sent, rows changed, and whether it ended in an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Result-set rows, over every result of the response.
    pub rows: u64,
    /// Affected rows of the OK packets of the response.
    pub affected: u64,
    /// The response (or one of its results) was an ERR packet.
    pub error: bool,
    /// Results the response held (each an OK or a result set).
    pub results: u32,
    /// The last result was a result set whose rows ended with their terminator (not an
    /// OK, an error, a file request or a cursor's column definitions).
    pub ended_rows: bool,
    /// The warnings the last result's OK or terminator counted.
    pub warnings: u16,
}

impl Outcome {
    /// A response that is one whole result set without warnings: what a query cache may
    /// keep and give back as it is.
    pub fn one_clean_result_set(&self) -> bool {
        self.results == 1 && self.ended_rows && self.warnings == 0 && !self.error
    }
}

impl ResponseTracker {
    pub fn new(kind: ResponseKind, caps: CapabilityFlags) -> ResponseTracker {
        let state = match kind {
            ResponseKind::None => State::Done,
            ResponseKind::Single => State::Single,
            ResponseKind::Query | ResponseKind::Execute { .. } => State::First,
            ResponseKind::Prepare => State::Prepared,
            ResponseKind::Fetch | ResponseKind::FieldList => State::Rows,
        };
        ResponseTracker {
            state,
            deprecate_eof: caps.contains(CapabilityFlags::DEPRECATE_EOF),
            kind,
            outcome: Outcome::default(),
        }
    }

    /// What the response did so far (all of it, once done).
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the packet about to be fed is an OK packet (which may carry session
    /// state): an OK where a response or result may start, or the OK-formatted
    /// terminator of a result set under `CLIENT_DEPRECATE_EOF`.
    pub fn is_ok_packet(&self, head: &[u8], len: usize) -> bool {
        if len >= crate::packet::MAX_PAYLOAD {
            return false;
        }
        match (self.state, head.first().copied()) {
            (State::Single | State::First, Some(OK_HEADER)) => true,
            (State::Rows, Some(EOF_HEADER)) => {
                self.deprecate_eof && self.kind != ResponseKind::FieldList
            }
            _ => false,
        }
    }

    /// Whether the next packet, starting with `head`, of payload length `len`, is a
    /// column definition or a row of a text-protocol result set.
    pub fn result_part(&self, head: &[u8], len: usize) -> Option<ResultPart> {
        if self.kind != ResponseKind::Query {
            return None;
        }
        let first = head.first().copied();
        match self.state {
            State::Columns { .. } if first != Some(ERR_HEADER) => Some(ResultPart::Column),
            State::Rows => match first {
                None | Some(ERR_HEADER) => None,
                Some(EOF_HEADER) if len < crate::packet::MAX_PAYLOAD => None,
                Some(_) => Some(ResultPart::Row),
            },
            _ => None,
        }
    }

    /// Feeds one logical packet: `head` holds its first `min(len, HEAD_NEEDED)` payload
    /// bytes and `len` is the payload length of its first chunk.
    pub fn feed(&mut self, head: &[u8], len: usize) -> Result<Step, ProtocolError> {
        let first = head.first().copied();
        let step = match self.state {
            State::Done => {
                return Err(ProtocolError::Malformed(
                    "packet after the end of a response",
                ))
            }
            State::Single => {
                self.outcome.error = first == Some(ERR_HEADER);
                let status = match first {
                    Some(OK_HEADER) => OkPacket::parse(head).ok().map(|ok| ok.status),
                    Some(EOF_HEADER) if len < 9 => terminator_status(head).ok(),
                    _ => None,
                };
                self.done(status)
            }
            State::First => match first {
                Some(OK_HEADER) => {
                    let ok = OkPacket::parse(head)?;
                    // Results of a multi-statement response each say up to 2^64 - 1.
                    self.outcome.affected = self.outcome.affected.saturating_add(ok.affected_rows);
                    self.outcome.ended_rows = false;
                    self.outcome.warnings = ok.warnings;
                    self.after_result(ok.status)
                }
                Some(ERR_HEADER) => self.failed(),
                Some(LOCAL_INFILE_HEADER) if self.kind == ResponseKind::Query => Step::LocalInfile,
                Some(_) => {
                    let columns = Reader::new(head).lenenc_int("column count")?;
                    if columns == 0 {
                        return Err(ProtocolError::Malformed("result set with no columns"));
                    }
                    self.state = State::Columns { left: columns };
                    Step::Continue
                }
                None => return Err(ProtocolError::Malformed("empty response packet")),
            },
            State::Columns { left } => {
                if first == Some(ERR_HEADER) {
                    return Ok(self.failed());
                }
                self.state = match (left - 1, self.deprecate_eof) {
                    (0, false) => State::ColumnsEof,
                    (0, true) => State::Rows,
                    (n, _) => State::Columns { left: n },
                };
                Step::Continue
            }
            State::ColumnsEof => match first {
                Some(EOF_HEADER) => {
                    let status = terminator_status(head)?;
                    if matches!(self.kind, ResponseKind::Execute { .. })
                        && status.contains(StatusFlags::CURSOR_EXISTS)
                    {
                        // A cursor was opened: rows come later, through COM_STMT_FETCH.
                        self.done(Some(status))
                    } else {
                        self.state = State::Rows;
                        Step::Continue
                    }
                }
                Some(ERR_HEADER) => self.failed(),
                _ => {
                    return Err(ProtocolError::Malformed(
                        "expected EOF after column definitions",
                    ))
                }
            },
            State::Rows => match first {
                // A row can start with 0xfe only when its first value is 16 MiB or more,
                // which makes its first chunk full-size; anything shorter is the terminator.
                Some(EOF_HEADER) if len < crate::packet::MAX_PAYLOAD => {
                    let (status, warnings) = terminator(head)?;
                    self.outcome.ended_rows = true;
                    self.outcome.warnings = warnings;
                    self.after_result(status)
                }
                Some(ERR_HEADER) => self.failed(),
                Some(_) => {
                    self.outcome.rows += 1;
                    Step::Continue
                }
                None => return Err(ProtocolError::Malformed("empty row packet")),
            },
            State::Prepared => match first {
                Some(OK_HEADER) => {
                    let mut r = Reader::new(head);
                    r.take(5, "prepare OK")?;
                    let columns = r.u16("column count")?;
                    let params = r.u16("parameter count")?;
                    self.state = if params > 0 {
                        State::Params {
                            left: params,
                            columns,
                        }
                    } else if columns > 0 {
                        State::PrepColumns { left: columns }
                    } else {
                        State::Done
                    };
                    self.step_if_done()
                }
                Some(ERR_HEADER) => self.failed(),
                _ => return Err(ProtocolError::Malformed("prepare response")),
            },
            State::Params { left, columns } => {
                self.state = match (left - 1, self.deprecate_eof) {
                    (0, false) => State::ParamsEof { columns },
                    (0, true) => Self::after_params(columns),
                    (n, _) => State::Params { left: n, columns },
                };
                self.step_if_done()
            }
            State::ParamsEof { columns } => {
                if first != Some(EOF_HEADER) {
                    return Err(ProtocolError::Malformed(
                        "expected EOF after parameter definitions",
                    ));
                }
                self.state = Self::after_params(columns);
                self.step_if_done()
            }
            State::PrepColumns { left } => {
                self.state = match (left - 1, self.deprecate_eof) {
                    (0, false) => State::PrepColumnsEof,
                    (0, true) => State::Done,
                    (n, _) => State::PrepColumns { left: n },
                };
                self.step_if_done()
            }
            State::PrepColumnsEof => {
                if first != Some(EOF_HEADER) {
                    return Err(ProtocolError::Malformed(
                        "expected EOF after column definitions",
                    ));
                }
                self.done(None)
            }
        };
        Ok(step)
    }

    fn after_params(columns: u16) -> State {
        if columns > 0 {
            State::PrepColumns { left: columns }
        } else {
            State::Done
        }
    }

    fn step_if_done(&self) -> Step {
        if self.state == State::Done {
            Step::Done(None)
        } else {
            Step::Continue
        }
    }

    fn after_result(&mut self, status: StatusFlags) -> Step {
        self.outcome.results += 1;
        if status.more_results() {
            self.state = State::First;
            Step::Continue
        } else {
            self.done(Some(status))
        }
    }

    fn done(&mut self, status: Option<StatusFlags>) -> Step {
        self.state = State::Done;
        Step::Done(status)
    }

    fn failed(&mut self) -> Step {
        self.outcome.error = true;
        self.done(None)
    }
}

/// An event the [`Scanner`] reports once every byte of the packet that caused it has
/// been counted as forwardable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Done(Option<StatusFlags>),
    LocalInfile,
    /// With [`Scanner::intercept_ok`]: an OK packet of `len` bytes (header included)
    /// starts right after the bytes counted. The caller consumes it whole, then scans on.
    Ok {
        len: usize,
    },
    /// With [`Scanner::intercept_rows`]: a column definition of a text result set, of
    /// `len` bytes, starts right after the bytes counted; consumed whole as [`Event::Ok`].
    Column {
        len: usize,
    },
    /// With [`Scanner::intercept_rows`]: a text-protocol row shorter than 16 MiB, of
    /// `len` bytes, consumed whole as [`Event::Ok`].
    Row {
        len: usize,
    },
}

/// Walks a response byte stream chunk by chunk, checking sequence ids and feeding the
/// tracker, and remembers where it is between calls so that large packets stream.
#[derive(Debug)]
pub struct Scanner {
    tracker: ResponseTracker,
    /// Payload bytes of the current chunk not yet passed over.
    skip: usize,
    /// The current chunk is full-size: the next chunk continues the same packet.
    continuing: bool,
    pending: Option<Event>,
    next_seq: u8,
    intercept: bool,
    intercept_rows: bool,
}

impl Scanner {
    /// A scanner for a response whose first packet carries sequence id `first_seq`.
    pub fn new(tracker: ResponseTracker, first_seq: u8) -> Scanner {
        Scanner {
            tracker,
            skip: 0,
            continuing: false,
            pending: None,
            next_seq: first_seq,
            intercept: false,
            intercept_rows: false,
        }
    }

    /// Surfaces every OK packet whole as [`Event::Ok`] instead of counting it as
    /// forwardable, for a caller that reads or rewrites them.
    pub fn intercept_ok(&mut self, on: bool) {
        self.intercept = on;
    }

    /// Surfaces every column definition and row of text result sets whole, as
    /// [`Event::Column`] and [`Event::Row`], for a caller that rewrites values. Rows of
    /// 16 MiB or more still stream.
    pub fn intercept_rows(&mut self, on: bool) {
        self.intercept_rows = on;
    }

    /// After the client's LOCAL INFILE data: the response goes on at `next_seq`.
    pub fn resume(&mut self, next_seq: u8) {
        self.next_seq = next_seq;
    }

    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// What the response did so far.
    pub fn outcome(&self) -> Outcome {
        self.tracker.outcome()
    }

    /// Looks at `buf`, the bytes not yet forwarded, and returns how many leading bytes
    /// may be forwarded now, with the event that ends them, if any. Bytes after an event
    /// are not counted: the caller handles the event, then scans the rest.
    pub fn scan(&mut self, buf: &[u8]) -> Result<(usize, Option<Event>), ProtocolError> {
        let mut pos = 0;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len() - pos);
                pos += n;
                self.skip -= n;
                if self.skip > 0 {
                    return Ok((pos, None));
                }
            }
            if !self.continuing {
                if let Some(ev) = self.pending.take() {
                    return Ok((pos, Some(ev)));
                }
            }
            let Some(h) = Header::parse(&buf[pos..]) else {
                return Ok((pos, None));
            };
            if h.seq != self.next_seq {
                return Err(ProtocolError::Sequence {
                    got: h.seq,
                    expected: self.next_seq,
                });
            }
            if self.continuing {
                self.next_seq = self.next_seq.wrapping_add(1);
                self.continuing = h.continues();
                self.skip = h.len;
                pos += HEADER_LEN;
                continue;
            }
            let need = h.len.min(HEAD_NEEDED);
            let body = &buf[pos + HEADER_LEN..];
            if body.len() < need {
                return Ok((pos, None));
            }
            if self.intercept && self.tracker.is_ok_packet(&body[..need], h.len) {
                if body.len() < h.len {
                    return Ok((pos, None));
                }
                match self.tracker.feed(&body[..need], h.len)? {
                    Step::Done(status) => self.pending = Some(Event::Done(status)),
                    Step::Continue => {}
                    Step::LocalInfile => {
                        return Err(ProtocolError::Malformed("LOCAL INFILE request in an OK"))
                    }
                }
                self.next_seq = self.next_seq.wrapping_add(1);
                return Ok((
                    pos,
                    Some(Event::Ok {
                        len: HEADER_LEN + h.len,
                    }),
                ));
            }
            let part = if self.intercept_rows && h.len < crate::packet::MAX_PAYLOAD {
                self.tracker.result_part(&body[..need], h.len)
            } else {
                None
            };
            if let Some(part) = part {
                if body.len() < h.len {
                    return Ok((pos, None));
                }
                if self.tracker.feed(&body[..need], h.len)? != Step::Continue {
                    return Err(ProtocolError::Malformed("a result set ended at a row"));
                }
                self.next_seq = self.next_seq.wrapping_add(1);
                let len = HEADER_LEN + h.len;
                return Ok((
                    pos,
                    Some(match part {
                        ResultPart::Column => Event::Column { len },
                        ResultPart::Row => Event::Row { len },
                    }),
                ));
            }
            let step = self.tracker.feed(&body[..need], h.len)?;
            self.next_seq = self.next_seq.wrapping_add(1);
            self.continuing = h.continues();
            self.skip = h.len;
            pos += HEADER_LEN;
            match step {
                Step::Continue => {}
                Step::Done(status) => self.pending = Some(Event::Done(status)),
                Step::LocalInfile => self.pending = Some(Event::LocalInfile),
            }
        }
    }
}

/// Walks one logical request packet (possibly many chunks) so it can be forwarded as it
/// arrives. Used for client commands and LOCAL INFILE data.
#[derive(Debug, Default)]
pub struct RequestSpan {
    skip: usize,
    continuing: bool,
    started: bool,
    next_seq: u8,
    /// Payload length of the first chunk: zero marks the end of LOCAL INFILE data.
    pub first_len: usize,
}

impl RequestSpan {
    pub fn new(first_seq: u8) -> RequestSpan {
        RequestSpan {
            next_seq: first_seq,
            ..Default::default()
        }
    }

    /// Sequence id the next packet in the exchange carries.
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }

    /// Returns how many leading bytes of `buf` belong to this packet, and whether the
    /// packet is complete with them.
    pub fn scan(&mut self, buf: &[u8]) -> Result<(usize, bool), ProtocolError> {
        let mut pos = 0;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len() - pos);
                pos += n;
                self.skip -= n;
                if self.skip > 0 {
                    return Ok((pos, false));
                }
            }
            if self.started && !self.continuing {
                return Ok((pos, true));
            }
            let Some(h) = Header::parse(&buf[pos..]) else {
                return Ok((pos, false));
            };
            if h.seq != self.next_seq {
                return Err(ProtocolError::Sequence {
                    got: h.seq,
                    expected: self.next_seq,
                });
            }
            if !self.started {
                self.first_len = h.len;
            }
            self.started = true;
            self.next_seq = self.next_seq.wrapping_add(1);
            self.continuing = h.continues();
            self.skip = h.len;
            pos += HEADER_LEN;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{write_packet, MAX_PAYLOAD};
    use crate::response::{eof_payload, ok_payload};
    use bytes::BytesMut;

    const MORE: u16 = StatusFlags::MORE_RESULTS_EXISTS;

    fn caps(deprecate_eof: bool) -> CapabilityFlags {
        let mut c = CapabilityFlags::PROTOCOL_41;
        if deprecate_eof {
            c |= CapabilityFlags::DEPRECATE_EOF;
        }
        CapabilityFlags(c)
    }

    /// An OK packet; with `deprecate_eof`, the 0xFE-headed form that ends a result set.
    fn ok_with(status: u16, deprecate_eof: bool) -> Vec<u8> {
        let header = if deprecate_eof { EOF_HEADER } else { OK_HEADER };
        let ok = OkPacket {
            status: StatusFlags(status),
            ..Default::default()
        };
        ok_payload(&ok, caps(deprecate_eof), header).to_vec()
    }

    fn ok(status: u16) -> Vec<u8> {
        ok_with(status, false)
    }

    fn ok_fe(status: u16) -> Vec<u8> {
        ok_with(status, true)
    }

    fn eof(status: u16) -> Vec<u8> {
        eof_payload(0, StatusFlags(status)).to_vec()
    }

    /// A text result set with `cols` columns and the given rows.
    fn result_set(cols: u8, rows: &[&[u8]], deprecate_eof: bool, status: u16) -> Vec<Vec<u8>> {
        let mut p = vec![vec![cols]];
        for _ in 0..cols {
            p.push(
                b"\x03def\x00\x00\x00\x01a\x00\x0c\x21\x00\x0b\x00\x00\x00\xfd\x00\x00\x00\x00\x00"
                    .to_vec(),
            );
        }
        if !deprecate_eof {
            p.push(eof(0));
        }
        for r in rows {
            p.push(r.to_vec());
        }
        p.push(if deprecate_eof {
            ok_fe(status)
        } else {
            eof(status)
        });
        p
    }

    fn stream(packets: &[Vec<u8>]) -> BytesMut {
        let mut b = BytesMut::new();
        let mut seq = 1;
        for p in packets {
            seq = write_packet(&mut b, seq, p);
        }
        b
    }

    /// Scans `bytes` fed in pieces of `piece` bytes; returns the events and their offsets.
    fn scan_all(
        kind: ResponseKind,
        deprecate_eof: bool,
        bytes: &[u8],
        piece: usize,
    ) -> Vec<(usize, Event)> {
        let mut s = Scanner::new(ResponseTracker::new(kind, caps(deprecate_eof)), 1);
        let mut events = Vec::new();
        let (mut fed, mut done) = (0usize, 0usize);
        while done < bytes.len() {
            fed = (fed + piece).min(bytes.len());
            loop {
                let (n, ev) = s.scan(&bytes[done..fed]).unwrap();
                done += n;
                match ev {
                    Some(e) => events.push((done, e)),
                    None => break,
                }
                if done == fed {
                    break;
                }
            }
        }
        events
    }

    /// Scans with rows intercepted, fed `piece` bytes at a time; returns the packets
    /// taken whole (as column or row) and whether the response ended.
    fn scan_rows(bytes: &[u8], deprecate_eof: bool, piece: usize) -> (Vec<(bool, Vec<u8>)>, bool) {
        let mut s = Scanner::new(
            ResponseTracker::new(ResponseKind::Query, caps(deprecate_eof)),
            1,
        );
        s.intercept_rows(true);
        let (mut taken, mut done, mut fed) = (Vec::new(), 0usize, 0usize);
        loop {
            let (n, ev) = s.scan(&bytes[done..fed]).unwrap();
            done += n;
            match ev {
                Some(Event::Column { len }) | Some(Event::Row { len }) => {
                    assert!(done + len <= fed, "a row is reported only when whole");
                    let column = matches!(ev, Some(Event::Column { .. }));
                    taken.push((column, bytes[done + HEADER_LEN..done + len].to_vec()));
                    done += len;
                }
                Some(Event::Done(_)) => return (taken, true),
                Some(e) => panic!("{e:?}"),
                None if fed == bytes.len() => return (taken, false),
                None => fed = (fed + piece).min(bytes.len()),
            }
        }
    }

    #[test]
    fn rows_are_taken_whole_when_intercepted() {
        for deprecate_eof in [false, true] {
            let rs = result_set(2, &[b"\x011\x01a", b"\x012\xfb"], deprecate_eof, 0);
            let bytes = stream(&rs);
            for piece in [1, 3, 7, bytes.len()] {
                let (taken, ended) = scan_rows(&bytes, deprecate_eof, piece);
                assert!(ended, "piece {piece}");
                let kinds: Vec<bool> = taken.iter().map(|(c, _)| *c).collect();
                assert_eq!(kinds, [true, true, false, false]);
                assert_eq!(taken[2].1, b"\x011\x01a");
                assert_eq!(taken[3].1, b"\x012\xfb");
            }
        }
    }

    /// Like [`scan_all`] with OK packets intercepted: each one is taken whole out of the
    /// stream as a caller would. Returns (offset, event) and the OK packets taken.
    fn scan_intercepting(
        kind: ResponseKind,
        deprecate_eof: bool,
        bytes: &[u8],
        piece: usize,
    ) -> (Vec<(usize, Event)>, Vec<Vec<u8>>) {
        let mut s = Scanner::new(ResponseTracker::new(kind, caps(deprecate_eof)), 1);
        s.intercept_ok(true);
        let (mut events, mut oks) = (Vec::new(), Vec::new());
        let (mut fed, mut done) = (0usize, 0usize);
        while done < bytes.len()
            || events
                .last()
                .is_some_and(|(_, e)| matches!(e, Event::Ok { .. }))
        {
            fed = (fed + piece).min(bytes.len());
            loop {
                let (n, ev) = s.scan(&bytes[done..fed]).unwrap();
                done += n;
                match ev {
                    Some(Event::Ok { len }) => {
                        assert!(done + len <= fed, "an OK is reported only when whole");
                        oks.push(bytes[done..done + len].to_vec());
                        done += len;
                        events.push((done, Event::Ok { len }));
                    }
                    Some(e) => events.push((done, e)),
                    None => break,
                }
                if done == fed && !matches!(events.last(), Some((_, Event::Ok { .. }))) {
                    break;
                }
            }
            if done == bytes.len() && !matches!(events.last(), Some((_, Event::Ok { .. }))) {
                break;
            }
        }
        (events, oks)
    }

    #[test]
    fn outcome_counts_rows_changes_and_errors() {
        let outcome = |kind, packets: &[Vec<u8>], deprecate_eof| {
            let bytes = stream(packets);
            let mut s = Scanner::new(ResponseTracker::new(kind, caps(deprecate_eof)), 1);
            let (n, ev) = s.scan(&bytes).unwrap();
            assert_eq!((n, matches!(ev, Some(Event::Done(_)))), (bytes.len(), true));
            s.outcome()
        };
        for deprecate_eof in [false, true] {
            let rows = result_set(
                2,
                &[b"\x011\x012", b"\x013\x014", b"\x015\x016"],
                deprecate_eof,
                2,
            );
            let o = outcome(ResponseKind::Query, &rows, deprecate_eof);
            assert_eq!((o.rows, o.affected, o.error), (3, 0, false));
            assert!(o.one_clean_result_set(), "{o:?}");
            // A warning in the terminator, in either of its forms.
            let mut warned = rows.clone();
            let status = StatusFlags(2);
            *warned.last_mut().unwrap() = if deprecate_eof {
                let ok = OkPacket {
                    warnings: 1,
                    status,
                    ..Default::default()
                };
                ok_payload(&ok, caps(true), EOF_HEADER).to_vec()
            } else {
                crate::response::eof_payload(1, status).to_vec()
            };
            let o = outcome(ResponseKind::Query, &warned, deprecate_eof);
            assert_eq!((o.rows, o.warnings), (3, 1));
            assert!(!o.one_clean_result_set());
        }
        let o = outcome(ResponseKind::Query, &[ok(2)], false);
        assert_eq!((o.results, o.ended_rows), (1, false));
        assert!(!o.one_clean_result_set(), "an OK is no result set");
        // Two results: three rows changed, then one row read.
        let changed = OkPacket {
            affected_rows: 3,
            status: StatusFlags(StatusFlags::MORE_RESULTS_EXISTS | 2),
            ..Default::default()
        };
        let mut packets = vec![ok_payload(&changed, caps(false), OK_HEADER).to_vec()];
        packets.extend(result_set(1, &[b"\x011"], false, 2));
        let o = outcome(ResponseKind::Query, &packets, false);
        assert_eq!((o.rows, o.affected, o.error), (1, 3, false));
        assert_eq!((o.results, o.ended_rows), (2, true));
        assert!(!o.one_clean_result_set(), "two results");

        // Counts a server can't mean (found by the scanner fuzz target) add up to the
        // most there is, not past it.
        let huge = OkPacket {
            affected_rows: u64::MAX - 1,
            ..changed
        };
        let huge = ok_payload(&huge, caps(false), OK_HEADER).to_vec();
        let o = outcome(ResponseKind::Query, &[huge.clone(), huge, ok(2)], false);
        assert_eq!(o.affected, u64::MAX);

        let err = b"\xff\x7a\x04#42S02no such table".to_vec();
        let o = outcome(ResponseKind::Query, std::slice::from_ref(&err), false);
        assert_eq!((o.rows, o.affected, o.error), (0, 0, true));
        assert!(!o.one_clean_result_set());
        // An error in the middle of the rows still counts the rows sent before it.
        let mut partial = result_set(1, &[b"\x011", b"\x012"], false, 2);
        *partial.last_mut().unwrap() = err;
        let o = outcome(ResponseKind::Query, &partial, false);
        assert_eq!((o.rows, o.error), (2, true));
    }

    #[test]
    fn intercepted_oks_come_whole_and_the_end_still_follows() {
        for piece in [1, 3, 7, 4096] {
            // A lone OK, then the done event with no more bytes.
            let bytes = stream(&[ok(2)]);
            let (ev, oks) = scan_intercepting(ResponseKind::Query, false, &bytes, piece);
            assert_eq!(
                ev,
                vec![
                    (bytes.len(), Event::Ok { len: bytes.len() }),
                    (bytes.len(), Event::Done(Some(StatusFlags(2))))
                ]
            );
            assert_eq!(oks, vec![bytes.to_vec()]);

            // Deprecate-EOF result set: its terminator is an OK.
            let packets = result_set(1, &[b"\x011"], true, 2);
            let bytes = stream(&packets);
            let (ev, oks) = scan_intercepting(ResponseKind::Query, true, &bytes, piece);
            let last = packets.last().unwrap().len() + HEADER_LEN;
            assert_eq!(
                ev,
                vec![
                    (bytes.len(), Event::Ok { len: last }),
                    (bytes.len(), Event::Done(Some(StatusFlags(2))))
                ],
                "piece {piece}"
            );
            assert_eq!(oks.len(), 1);

            // Classic EOF terminators are not OKs.
            let bytes = stream(&result_set(1, &[b"\x011"], false, 2));
            let (ev, oks) = scan_intercepting(ResponseKind::Query, false, &bytes, piece);
            assert_eq!(ev, vec![(bytes.len(), Event::Done(Some(StatusFlags(2))))]);
            assert!(oks.is_empty());

            // Multi-results: an OK with more results, a result set, the final OK.
            let mut packets = vec![ok(MORE)];
            packets.extend(result_set(1, &[b"\x011"], true, MORE));
            packets.push(ok(0));
            let bytes = stream(&packets);
            let (ev, oks) =
                scan_intercepting(ResponseKind::Execute { cursor: false }, true, &bytes, piece);
            assert_eq!(oks.len(), 3, "piece {piece}: {ev:?}");
            assert_eq!(
                ev.last(),
                Some(&(bytes.len(), Event::Done(Some(StatusFlags(0)))))
            );

            // An error is no OK; a Single-kind OK is.
            let bytes = stream(&[err_packet()]);
            let (ev, oks) = scan_intercepting(ResponseKind::Query, true, &bytes, piece);
            assert_eq!(ev, vec![(bytes.len(), Event::Done(None))]);
            assert!(oks.is_empty());
            let bytes = stream(&[ok(2)]);
            let (_, oks) = scan_intercepting(ResponseKind::Single, true, &bytes, piece);
            assert_eq!(oks.len(), 1);
        }
    }

    /// A minimal ERR payload.
    fn err_packet() -> Vec<u8> {
        b"\xff\x10\x04#42000oops".to_vec()
    }

    #[test]
    fn text_result_set_ends_at_terminator_in_any_piece_size() {
        for deprecate_eof in [false, true] {
            let bytes = stream(&result_set(
                2,
                &[b"\x011\x012", b"\xfb\x013"],
                deprecate_eof,
                2,
            ));
            for piece in [1, 3, 7, 64, 4096] {
                let ev = scan_all(ResponseKind::Query, deprecate_eof, &bytes, piece);
                assert_eq!(
                    ev,
                    vec![(bytes.len(), Event::Done(Some(StatusFlags(2))))],
                    "piece {piece} deprecate_eof {deprecate_eof}"
                );
            }
        }
    }

    #[test]
    fn multi_results_continue_until_last() {
        for deprecate_eof in [false, true] {
            let mut packets = result_set(1, &[b"\x011"], deprecate_eof, MORE);
            packets.extend(result_set(1, &[b"\x012"], deprecate_eof, MORE));
            packets.push(ok(0));
            let bytes = stream(&packets);
            let ev = scan_all(ResponseKind::Query, deprecate_eof, &bytes, 5);
            assert_eq!(ev, vec![(bytes.len(), Event::Done(Some(StatusFlags(0))))]);
        }
    }

    #[test]
    fn error_in_the_middle_ends_the_response() {
        let mut packets = result_set(1, &[b"\x011"], false, MORE);
        packets.push(b"\xff\x28\x04#42000syntax".to_vec());
        let bytes = stream(&packets);
        assert_eq!(
            scan_all(ResponseKind::Query, false, &bytes, 9),
            vec![(bytes.len(), Event::Done(None))]
        );
    }

    #[test]
    fn row_of_sixteen_mib_starting_with_fe_is_a_row() {
        // A text row whose only value is 16 MiB long: lenenc prefix 0xfe.
        let value_len = MAX_PAYLOAD + 100;
        let mut row = vec![0xfe];
        row.extend_from_slice(&(value_len as u64).to_le_bytes());
        row.resize(9 + value_len, b'x');
        let bytes = stream(&result_set(1, &[&row], true, 0));
        let ev = scan_all(ResponseKind::Query, true, &bytes, 1 << 20);
        assert_eq!(ev, vec![(bytes.len(), Event::Done(Some(StatusFlags(0))))]);
    }

    #[test]
    fn local_infile_pauses_then_resumes() {
        let mut s = Scanner::new(ResponseTracker::new(ResponseKind::Query, caps(false)), 1);
        let req = stream(&[b"\xfb/tmp/x.csv".to_vec()]);
        assert_eq!(s.scan(&req).unwrap(), (req.len(), Some(Event::LocalInfile)));
        // The client sent its file in packets 2..=3 (3 is the empty one); OK is 4.
        s.resume(4);
        let mut okb = BytesMut::new();
        write_packet(&mut okb, 4, &ok(2));
        assert_eq!(
            s.scan(&okb).unwrap(),
            (okb.len(), Some(Event::Done(Some(StatusFlags(2)))))
        );
    }

    #[test]
    fn prepare_counts_params_and_columns() {
        for deprecate_eof in [false, true] {
            let mut packets = vec![b"\x00\x01\x00\x00\x00\x02\x00\x01\x00\x00\x00\x00".to_vec()];
            packets.push(b"\x03def".to_vec());
            if !deprecate_eof {
                packets.push(eof(0));
            }
            packets.push(b"\x03def".to_vec());
            packets.push(b"\x03def".to_vec());
            if !deprecate_eof {
                packets.push(eof(0));
            }
            let bytes = stream(&packets);
            assert_eq!(
                scan_all(ResponseKind::Prepare, deprecate_eof, &bytes, 2),
                vec![(bytes.len(), Event::Done(None))]
            );
        }
    }

    #[test]
    fn cursor_execute_stops_after_metadata() {
        let packets = vec![
            vec![1u8],
            b"\x03def".to_vec(),
            eof(StatusFlags::CURSOR_EXISTS | StatusFlags::AUTOCOMMIT),
        ];
        let bytes = stream(&packets);
        let ev = scan_all(ResponseKind::Execute { cursor: true }, false, &bytes, 64);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].0, bytes.len());
    }

    #[test]
    fn wrong_sequence_is_an_error() {
        let mut b = BytesMut::new();
        write_packet(&mut b, 7, &ok(0));
        let mut s = Scanner::new(ResponseTracker::new(ResponseKind::Single, caps(false)), 1);
        assert!(matches!(s.scan(&b), Err(ProtocolError::Sequence { .. })));
    }

    #[test]
    fn request_span_streams_large_packets() {
        let payload = vec![3u8; MAX_PAYLOAD + 5];
        let mut b = BytesMut::new();
        write_packet(&mut b, 0, &payload);
        b.extend_from_slice(b"next");
        let mut span = RequestSpan::new(0);
        let (n1, done1) = span.scan(&b[..1000]).unwrap();
        assert_eq!((n1, done1), (1000, false));
        let (n2, done2) = span.scan(&b[1000..]).unwrap();
        assert!(done2);
        assert_eq!(n1 + n2, b.len() - 4);
        assert_eq!(span.next_seq(), 2);
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 12345u32;
        for _ in 0..2000 {
            let len = (seed % 64) as usize;
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
                    (seed >> 16) as u8
                })
                .collect();
            for kind in [
                ResponseKind::Query,
                ResponseKind::Prepare,
                ResponseKind::Single,
                ResponseKind::Fetch,
            ] {
                let mut s = Scanner::new(
                    ResponseTracker::new(kind, caps(true)),
                    junk.get(3).copied().unwrap_or(0),
                );
                let _ = s.scan(&junk);
            }
        }
    }
}
