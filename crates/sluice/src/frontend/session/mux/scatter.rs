//! A read no key decides, run on every shard it may touch, one after the other, its rows
//! put together into one result with the first shard's column definitions and one
//! terminator (the last shard's status, every shard's warnings). Only shapes that can be
//! put together exactly get here ([`crate::shard::merging`]): rows concatenated as they
//! stream (a shard's error ends the result, as a server's error mid-result does); or,
//! each shard running the statement `shard::plan` wrote for it and read whole first,
//! put together by `shard::gather` (any error, or a combination that could not be
//! exact, is then the whole answer).

use super::*;
use crate::error::BackendError;
use crate::shard::config::CrossShard;
use crate::shard::gather::{put_together, ColumnInfo};
use crate::shard::plan::Gather;
use crate::shard::{Merge, Shards};
use sluice_wire::packet::Header;
use sluice_wire::response::{
    eof_payload, ok_payload, terminator_warnings, EOF_HEADER, ERR_HEADER, OK_HEADER,
};
use sluice_wire::resultset::{text_row, text_values, ColumnDef};
use sluice_wire::CapabilityFlags;

/// How one shard's part of a read whose rows concatenate ended.
enum ShardPart {
    /// Its rows went out, then this terminator: the next shard's rows follow.
    Done(Vec<u8>),
    /// With the server's error, forwarded: the result is over.
    Refused,
    /// The shard's connection failed midway: the result is over, the session goes on.
    Lost(BackendError),
}

/// One shard's whole answer to a gathered read.
struct Answer {
    defs: Vec<Vec<u8>>,
    /// The definitions carry MariaDB's extended metadata.
    extended: bool,
    eof: Option<Vec<u8>>,
    rows: Vec<Vec<u8>>,
    /// More rows came than were kept.
    over: bool,
    end: Vec<u8>,
}

fn column_defs(a: &Answer) -> Vec<ColumnInfo> {
    a.defs
        .iter()
        .map(|d| match ColumnDef::parse(d, a.extended) {
            Ok(c) => ColumnInfo {
                name: c.name.to_ascii_lowercase(),
                column_type: c.column_type,
                charset: c.charset,
            },
            Err(_) => ColumnInfo {
                name: Vec::new(),
                column_type: 0xff,
                charset: 0,
            },
        })
        .collect()
}

/// The rows the client gets from every shard's whole answer, each a text row packet.
fn gathered_rows(g: &Gather, answers: &[Answer]) -> Result<Vec<Vec<u8>>, &'static str> {
    let Some(first) = answers.first() else {
        return Ok(Vec::new());
    };
    let defs = column_defs(first);
    if answers.iter().any(|a| column_defs(a) != defs) {
        return Err("a read whose shards answered with different columns");
    }
    if answers.iter().any(|a| a.over) {
        return Err(match g.group {
            Some(_) => "GROUP BY over several shards with more than 10,000 groups on one shard",
            None => "a read over several shards whose shards sent more rows than asked for",
        });
    }
    let mut rows = Vec::new();
    for a in answers {
        for row in &a.rows {
            let values = text_values(row).map_err(|_| "a row Sluice could not read")?;
            rows.push(values.iter().map(|v| v.map(<[u8]>::to_vec)).collect());
        }
    }
    Ok(put_together(g, &defs, rows)?
        .iter()
        .map(|r| {
            let values: Vec<Option<&[u8]>> = r.iter().map(|v| v.as_deref()).collect();
            text_row(&values).to_vec()
        })
        .collect())
}

fn held_connection() -> ErrPacket {
    ErrPacket::new(
        code::ER_NOT_SUPPORTED_YET,
        "42000",
        "This version of Sluice doesn't yet support 'a read over several shards from a \
         session holding a connection'"
            .to_string(),
    )
}

/// A terminating packet: classic EOF, or OK with the EOF header under
/// CLIENT_DEPRECATE_EOF (a row starting with 0xFE is at least 16 MiB).
fn is_terminator(payload: &[u8]) -> bool {
    payload.first() == Some(&EOF_HEADER) && payload.len() < 0xFF_FFFF
}

impl Session {
    /// Runs the text read of `len` bytes at the front of the client buffer on `targets`
    /// (shard indexes) and answers the client with every row.
    pub(in crate::frontend::session) async fn scatter(
        &mut self,
        stmt: &Statement,
        shards: &Shards,
        targets: &[usize],
        merge: Merge,
    ) -> Result<bool, SessionError> {
        let len = stmt.len;
        if let Merge::Gathered(g) = merge {
            return self.scatter_gathered(stmt, shards, targets, g).await;
        }
        let request = self.client.rbuf[..HEADER_LEN + len].to_vec();
        let mut seq = 1u8;
        let mut warnings = 0u16;
        let mut last: Option<Vec<u8>> = None;
        for (n, &shard) in targets.iter().enumerate() {
            let part = self.stmt.open_stage();
            // A shard that can't be had after others' rows went out ends the result with
            // its error, numbered after those rows.
            let Some(fx) = self
                .enter_for(shards, shard, n, &request, stmt, (n > 0).then_some(seq))
                .await?
            else {
                self.shard_stage(part, shards, shard, None, 0);
                return Ok(true);
            };
            let server = self.traced_server(&part);
            // Preparing it on this connection may have rewritten the request.
            let len = Header::parse(&self.client.rbuf).map_or(len, |h| h.len);
            let mut rows = 0;
            let outcome = self.scatter_one(len, n == 0, &mut seq, &mut rows).await?;
            self.stmt.outcome.rows += rows;
            let ended = match outcome {
                ShardPart::Done(terminator) => {
                    warnings =
                        warnings.saturating_add(terminator_warnings(&terminator).unwrap_or(0));
                    last = Some(terminator);
                    false
                }
                ShardPart::Refused => true,
                ShardPart::Lost(e) => {
                    if let Some(b) = self.backing.conn_mut() {
                        b.mark_broken();
                    }
                    self.client.write_err(seq, &e.to_err_packet()).await?;
                    true
                }
            };
            self.mux_finish(&fx, stmt).await?;
            self.shard_stage(part, shards, shard, server, rows);
            if ended {
                return Ok(true);
            }
        }
        let Some(last) = last else {
            return Ok(true);
        };
        let end = self.terminator(&last, warnings);
        self.client.write_packet(seq, &end).await?;
        Ok(true)
    }

    /// Puts the connection of `shard` in line for the request of `len` bytes at the
    /// front of the client buffer (put back there first unless `n` is 0). In a
    /// transaction, the shard's part runs in it: on the connection the transaction
    /// holds there, or a new XA branch. `None`: the client got the error (numbered
    /// `seq` when rows went out before).
    async fn enter_for(
        &mut self,
        shards: &Shards,
        shard: usize,
        n: usize,
        request: &[u8],
        stmt: &Statement,
        seq: Option<u8>,
    ) -> Result<Option<Effects>, SessionError> {
        if n > 0 {
            self.client.put_back(request);
        }
        let from = self
            .backing
            .muxed()
            .shard
            .unwrap_or(shards.map.default_shard());
        if from != shard && !self.move_to_shard(shards, from, shard).await? {
            if !self.in_transaction() || shards.cross_shard == CrossShard::Refuse {
                let next = self.client.skip_packet().await?;
                self.client
                    .write_err(seq.unwrap_or(next), &held_connection())
                    .await?;
                return Ok(None);
            }
            self.spread_to(shards, from, shard);
        }
        let router = shards.routers[shard].clone();
        // Whatever this stage answers instead continues the rows already sent.
        self.client.continue_at = seq;
        let lease = self.stmt.open_stage();
        let ready = self.mux_prepare(stmt, &router).await;
        self.stmt.close_stage(lease, "lease", Vec::new);
        self.client.continue_at = None;
        match ready? {
            Ready::Go(fx) => {
                if let Err(failed) = self.begin_deferred().await {
                    let err = failed.answered()?;
                    let next = self.client.skip_packet().await?;
                    self.client.write_err(seq.unwrap_or(next), &err).await?;
                    self.release_if_free().await?;
                    return Ok(None);
                }
                // Each shard's server counts the statement it is sent (its traffic).
                if let Some(b) = self.backing.conn() {
                    b.server
                        .counters
                        .relayed(stmt.len as u64, 0, std::time::Duration::ZERO, false);
                }
                Ok(Some(fx))
            }
            Ready::Done(_) => Ok(None),
        }
    }

    /// Runs the gathered read's own statement on every shard, reads each whole answer,
    /// then sends the client one result built from them (the first shard's column
    /// definitions, less those only the shards were asked for). When that could not be
    /// exact, the client gets error 1235 and nothing else.
    async fn scatter_gathered(
        &mut self,
        stmt: &Statement,
        shards: &Shards,
        targets: &[usize],
        gather: Gather,
    ) -> Result<bool, SessionError> {
        let request = self.client.rbuf[..HEADER_LEN + stmt.len].to_vec();
        let mut payload = vec![Command::Query as u8];
        payload.extend_from_slice(&gather.sql);
        let mut answers: Vec<Answer> = Vec::new();
        for (n, &shard) in targets.iter().enumerate() {
            let part = self.stmt.open_stage();
            let Some(fx) = self
                .enter_for(shards, shard, n, &request, stmt, None)
                .await?
            else {
                self.shard_stage(part, shards, shard, None, 0);
                return Ok(true);
            };
            let server = self.traced_server(&part);
            self.client.skip_packet().await?;
            let answer = self.read_answer(&payload, gather.keep).await;
            if answer.is_err() {
                if let Some(b) = self.backing.conn_mut() {
                    b.mark_broken();
                }
            }
            // Each shard ran the gathering query Sluice wrote, not the client's.
            let gathering = Statement {
                command: Command::Query,
                kind: ResponseKind::Query,
                client_id: None,
                ..*stmt
            };
            self.mux_finish(&fx, &gathering).await?;
            let rows = match &answer {
                Ok(Ok(a)) => a.rows.len() as u64,
                _ => 0,
            };
            self.shard_stage(part, shards, shard, server, rows);
            match answer {
                Ok(Ok(a)) => answers.push(a),
                Ok(Err(err)) => {
                    self.client.write_packet(1, &err).await?;
                    return Ok(true);
                }
                Err(e) => {
                    self.client.write_err(1, &e.to_err_packet()).await?;
                    return Ok(true);
                }
            }
        }
        let rows = match gathered_rows(&gather, &answers) {
            Ok(rows) => rows,
            Err(why) => {
                let err = ErrPacket::new(
                    code::ER_NOT_SUPPORTED_YET,
                    "42000",
                    format!("This version of Sluice doesn't yet support '{why}'"),
                );
                self.client.write_err(1, &err).await?;
                return Ok(true);
            }
        };
        let Some(first) = answers.first() else {
            return Ok(true);
        };
        let warnings = answers.iter().fold(0u16, |w, a| {
            w.saturating_add(terminator_warnings(&a.end).unwrap_or(0))
        });
        let shown = first.defs.len().saturating_sub(gather.hidden);
        let mut head = bytes::BytesMut::new();
        sluice_wire::lenenc::put_lenenc_int(&mut head, shown as u64);
        let mut out = bytes::BytesMut::new();
        let mut seq = 1u8;
        seq = sluice_wire::packet::write_packet(&mut out, seq, &head);
        for d in &first.defs[..shown] {
            seq = sluice_wire::packet::write_packet(&mut out, seq, d);
        }
        if let Some(eof) = &first.eof {
            seq = sluice_wire::packet::write_packet(&mut out, seq, eof);
        }
        for row in &rows {
            seq = sluice_wire::packet::write_packet(&mut out, seq, row);
        }
        self.stmt.outcome.rows = rows.len() as u64;
        let last = answers.last().map(|a| a.end.clone()).unwrap_or_default();
        let end = self.terminator(&last, warnings);
        sluice_wire::packet::write_packet(&mut out, seq, &end);
        self.client.write_all(&out).await?;
        Ok(true)
    }

    /// The server of the connection in hand, for a traced shard's part.
    fn traced_server(&self, part: &Option<crate::trace::Open>) -> Option<String> {
        let b = self.backing.conn().filter(|_| part.is_some())?;
        Some(b.server.endpoint.to_string())
    }

    /// A shard's part of a scattered read ended: a `shard` stage naming the shard, the
    /// server it ran on and the rows it sent.
    fn shard_stage(
        &mut self,
        part: Option<crate::trace::Open>,
        shards: &Shards,
        shard: usize,
        server: Option<String>,
        rows: u64,
    ) {
        self.stmt.close_stage(part, "shard", || {
            use crate::trace::Value;
            let name = shards.map.names().get(shard).cloned().unwrap_or_default();
            let mut a = vec![
                ("sluice.shard", Value::Str(name)),
                ("db.response.returned_rows", Value::Int(rows as i64)),
            ];
            if let Some(server) = server {
                a.push(("server.address", Value::Str(server)));
            }
            a
        });
    }

    /// The last shard's terminator with every shard's warnings.
    fn terminator(&self, last: &[u8], warnings: u16) -> Vec<u8> {
        if last.len() == 5 {
            let status = sluice_wire::response::terminator_status(last)
                .unwrap_or(StatusFlags(StatusFlags::AUTOCOMMIT));
            return eof_payload(warnings, status).to_vec();
        }
        match OkPacket::parse(last) {
            Ok(mut ok) => {
                ok.warnings = warnings;
                ok_payload(&ok, self.client.caps, EOF_HEADER).to_vec()
            }
            Err(_) => last.to_vec(),
        }
    }

    /// Sends `payload` on the connection held and reads its whole answer: a result set
    /// (`Ok(Ok)`), or the server's error packet (`Ok(Err)`).
    /// At most `keep` rows are kept (the caller refuses an answer with more).
    async fn read_answer(
        &mut self,
        payload: &[u8],
        keep: usize,
    ) -> Result<Result<Answer, Vec<u8>>, BackendError> {
        let deprecate_eof = self.client.caps.contains(CapabilityFlags::DEPRECATE_EOF);
        let backend = self.backing.conn_mut().expect("acquired");
        backend.write_packet(0, payload).await?;
        let head = backend.read_packet().await?.payload.to_vec();
        if head.first() == Some(&ERR_HEADER) {
            return Ok(Err(head));
        }
        let columns = sluice_wire::lenenc::Reader::new(&head)
            .lenenc_int("column count")
            .unwrap_or(0);
        let mut defs = Vec::new();
        for _ in 0..columns {
            defs.push(backend.read_packet().await?.payload.to_vec());
        }
        let eof = match deprecate_eof {
            true => None,
            false => Some(backend.read_packet().await?.payload.to_vec()),
        };
        let mut rows = Vec::new();
        let mut over = false;
        loop {
            let p = backend.read_packet().await?.payload.to_vec();
            if p.first() == Some(&ERR_HEADER) {
                return Ok(Err(p));
            }
            if is_terminator(&p) {
                if let Ok(status) = sluice_wire::response::terminator_status(&p) {
                    backend.status = status;
                }
                return Ok(Ok(Answer {
                    defs,
                    extended: backend.extended_metadata(),
                    eof,
                    rows,
                    over,
                    end: p,
                }));
            }
            if rows.len() < keep {
                rows.push(p);
            } else {
                over = true;
            }
        }
    }

    /// Sends the request at the front of the client buffer to the connection held and
    /// forwards its answer: the column definitions only when `first`, the rows always
    /// (counted in `rows`), with the client's sequence ids.
    async fn scatter_one(
        &mut self,
        len: usize,
        first: bool,
        seq: &mut u8,
        rows: &mut u64,
    ) -> Result<ShardPart, SessionError> {
        let request = self.client.rbuf[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.client.skip_packet().await?;
        let deprecate_eof = self.client.caps.contains(CapabilityFlags::DEPRECATE_EOF);
        let backend = self.backing.conn_mut().expect("acquired");
        let client = &mut self.client;
        let mut out = bytes::BytesMut::new();
        // Packets for the client are framed into `out` and written a batch at a time.
        let mut put = |out: &mut bytes::BytesMut, payload: &[u8]| {
            *seq = sluice_wire::packet::write_packet(out, *seq, payload);
        };
        macro_rules! backend {
            ($e:expr) => {
                match $e.await {
                    Ok(v) => v,
                    Err(e) => {
                        client.stream_write(&out).await?;
                        return Ok(ShardPart::Lost(e));
                    }
                }
            };
        }
        backend!(backend.write_packet(0, &request));
        let head = backend!(backend.read_packet());
        if head.payload.first() == Some(&ERR_HEADER) {
            put(&mut out, &head.payload);
            client.stream_write(&out).await?;
            return Ok(ShardPart::Refused);
        }
        if head.payload.first() == Some(&OK_HEADER) {
            // No result set: nothing to forward.
            return Ok(ShardPart::Done(eof_payload(0, backend.status).to_vec()));
        }
        let columns = sluice_wire::lenenc::Reader::new(&head.payload)
            .lenenc_int("column count")
            .unwrap_or(0);
        if first {
            put(&mut out, &head.payload);
        }
        for _ in 0..columns {
            let def = backend!(backend.read_packet());
            if first {
                put(&mut out, &def.payload);
            }
        }
        if !deprecate_eof {
            let eof = backend!(backend.read_packet());
            if first {
                put(&mut out, &eof.payload);
            }
        }
        loop {
            if out.len() >= 64 * 1024 {
                client.stream_write(&out).await?;
                out.clear();
            }
            let p = backend!(backend.read_packet());
            if p.payload.first() == Some(&ERR_HEADER) {
                put(&mut out, &p.payload);
                client.stream_write(&out).await?;
                return Ok(ShardPart::Refused);
            }
            if is_terminator(&p.payload) {
                if let Ok(status) = sluice_wire::response::terminator_status(&p.payload) {
                    backend.status = status;
                }
                client.stream_write(&out).await?;
                return Ok(ShardPart::Done(p.payload.to_vec()));
            }
            put(&mut out, &p.payload);
            *rows += 1;
        }
    }
}
