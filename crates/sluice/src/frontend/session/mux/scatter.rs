//! A read no key decides, run on every shard it may touch, one after the other, its rows
//! put together into one result: the first shard's column definitions, every shard's
//! rows in turn, and one terminator (the last shard's status, every shard's warnings).
//! Only shapes whose rows concatenate exactly get here ([`crate::shard::unmergeable`]);
//! a shard's error ends the result, as a server's error mid-result does.

use super::*;
use crate::error::BackendError;
use crate::shard::Shards;
use sluice_wire::response::{
    eof_payload, ok_payload, terminator_warnings, EOF_HEADER, ERR_HEADER, OK_HEADER,
};
use sluice_wire::CapabilityFlags;

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
        len: usize,
        shards: &Shards,
        targets: &[usize],
    ) -> Result<bool, SessionError> {
        let request = self.client.rbuf[..HEADER_LEN + len].to_vec();
        let mut seq = 1u8;
        let mut warnings = 0u16;
        let mut last: Option<Vec<u8>> = None;
        for (n, &shard) in targets.iter().enumerate() {
            if n > 0 {
                let rest = self.client.rbuf.split();
                self.client.rbuf.extend_from_slice(&request);
                self.client.rbuf.extend_from_slice(&rest);
            }
            let from = self
                .backing
                .muxed()
                .shard
                .unwrap_or(shards.map.default_shard());
            if from != shard && !self.move_to_shard(shards, from, shard).await? {
                // Only reached outside transactions, with nothing pinned.
                let seq_now = self.client.skip_packet().await?;
                let err = ErrPacket::new(
                    code::ER_NOT_SUPPORTED_YET,
                    "42000",
                    "This version of Sluice doesn't yet support 'a read over several shards \
                     from a session holding a connection'"
                        .to_string(),
                );
                self.client
                    .write_err(if n == 0 { seq_now } else { seq }, &err)
                    .await?;
                return Ok(true);
            }
            let router = shards.routers[shard].clone();
            let fx = match self.mux_prepare(len, &router).await? {
                Ready::Go(fx) => fx,
                // Answered (an error) by the stage itself: it ends the result.
                Ready::Done(going_on) => return Ok(going_on),
            };
            let outcome = self.scatter_one(len, n == 0, &mut seq).await?;
            let ended = match outcome {
                Ok(Some(terminator)) => {
                    warnings =
                        warnings.saturating_add(terminator_warnings(&terminator).unwrap_or(0));
                    last = Some(terminator);
                    false
                }
                Ok(None) => true,
                Err(e) => {
                    if let Some(b) = self.backend.as_mut() {
                        b.mark_broken();
                    }
                    let err = e.to_err_packet();
                    self.client.write_err(seq, &err).await?;
                    self.backend = None;
                    true
                }
            };
            self.mux_finish(&fx, Some(Command::Query), None).await?;
            if ended {
                return Ok(true);
            }
        }
        let Some(last) = last else {
            return Ok(true);
        };
        let end = if last.len() == 5 {
            let status = sluice_wire::response::terminator_status(&last)
                .unwrap_or(StatusFlags(StatusFlags::AUTOCOMMIT));
            eof_payload(warnings, status).to_vec()
        } else {
            match OkPacket::parse(&last) {
                Ok(mut ok) => {
                    ok.warnings = warnings;
                    ok_payload(&ok, self.client.caps, EOF_HEADER).to_vec()
                }
                Err(_) => last,
            }
        };
        self.client.write_packet(seq, &end).await?;
        Ok(true)
    }

    /// Sends the request at the front of the client buffer to the connection held and
    /// forwards its answer: the column definitions only when `first`, the rows always,
    /// with the client's sequence ids. `Ok(Some(terminator))` once the rows ended;
    /// `Ok(None)` when an error packet ended the result (it went to the client); the
    /// inner error is the server's connection failing.
    async fn scatter_one(
        &mut self,
        len: usize,
        first: bool,
        seq: &mut u8,
    ) -> Result<Result<Option<Vec<u8>>, BackendError>, SessionError> {
        let request = self.client.rbuf[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.client.skip_packet().await?;
        let deprecate_eof = self.client.caps.contains(CapabilityFlags::DEPRECATE_EOF);
        let backend = self.backend.as_mut().expect("acquired");
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
                        return Ok(Err(e));
                    }
                }
            };
        }
        backend!(backend.write_packet(0, &request));
        let head = backend!(backend.read_packet());
        if head.payload.first() == Some(&ERR_HEADER) {
            put(&mut out, &head.payload);
            client.stream_write(&out).await?;
            return Ok(Ok(None));
        }
        if head.payload.first() == Some(&OK_HEADER) {
            // No result set: nothing to forward.
            return Ok(Ok(Some(eof_payload(0, backend.status).to_vec())));
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
                return Ok(Ok(None));
            }
            if is_terminator(&p.payload) {
                if let Ok(status) = sluice_wire::response::terminator_status(&p.payload) {
                    backend.status = status;
                }
                client.stream_write(&out).await?;
                return Ok(Ok(Some(p.payload.to_vec())));
            }
            put(&mut out, &p.payload);
        }
    }
}
