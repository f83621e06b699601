//! Delay links: the network between two simulated hosts, in user space. A link listens
//! on loopback and relays each connection to its target, holding every chunk of bytes
//! for a fixed one-way delay (plus optional jitter) in each direction, in order, as a
//! wire of that latency would. Benchmarks put servers, Sluice and the load generator
//! behind links to give a single machine the hops of several (`netem` does this in the
//! kernel where it exists; this needs neither it nor privileges).
//!
//! Each direction of a connection is a reader thread that stamps what it reads with its
//! delivery time and a writer thread that sleeps until then and writes. Threads, not an
//! async runtime: a runtime's timers tick in milliseconds, and the delays wanted here
//! are a tenth of that; the writers ask the kernel for a 1 ns timer slack so that a
//! sleep ends when asked rather than up to 50 µs later. What the relay itself adds (two
//! more socket hops and thread wake-ups) is measured by [`round_trip`] through a link
//! with no delay, so reports can give it beside their figures.

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a link adds, each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkSpec {
    /// Every chunk waits this long before it is passed on.
    pub one_way: Duration,
    /// Each chunk waits up to this much more or less (uniformly), never so little that
    /// it would overtake the chunk before it.
    pub jitter: Duration,
}

impl LinkSpec {
    pub fn delay(one_way: Duration) -> LinkSpec {
        LinkSpec {
            one_way,
            jitter: Duration::ZERO,
        }
    }
}

/// Counters of one link, over all its connections.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    bytes_forward: AtomicU64,
    bytes_back: AtomicU64,
    chunks: AtomicU64,
    /// Total and worst time chunks were passed on after their due time, in ns.
    late_ns: AtomicU64,
    worst_late_ns: AtomicU64,
}

/// A link's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub connections: u64,
    /// Bytes towards the target, and back.
    pub bytes_forward: u64,
    pub bytes_back: u64,
    /// Chunks passed on, and how late after their due time on average and at worst:
    /// how well the delay was kept (a busy machine wakes the writers late).
    pub chunks: u64,
    pub mean_late: Duration,
    pub worst_late: Duration,
}

/// A running link: connections to [`DelayLink::addr`] reach the target with the delay.
/// Dropping it closes the listener and every connection it relays.
pub struct DelayLink {
    addr: SocketAddr,
    target: SocketAddr,
    spec: LinkSpec,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    open: Open,
    accept: Option<JoinHandle<()>>,
}

/// Each relayed connection's two sockets by connection number, so that dropping the
/// link can close them; a connection leaves when both its directions have ended.
type Open = Arc<Mutex<HashMap<u64, [TcpStream; 2]>>>;

impl std::fmt::Debug for DelayLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayLink")
            .field("addr", &self.addr)
            .field("target", &self.target)
            .field("spec", &self.spec)
            .finish()
    }
}

impl DelayLink {
    /// A link on a free loopback port to `target`.
    pub fn start(target: SocketAddr, spec: LinkSpec) -> Result<DelayLink> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a link")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let open = Arc::new(Mutex::new(HashMap::new()));
        let accept = {
            let (stop, counters, open) = (stop.clone(), counters.clone(), open.clone());
            std::thread::Builder::new()
                .name(format!("link-{}", addr.port()))
                .spawn(move || accept_loop(listener, target, spec, stop, counters, open))
                .context("starting a link")?
        };
        Ok(DelayLink {
            addr,
            target,
            spec,
            stop,
            counters,
            open,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    pub fn spec(&self) -> LinkSpec {
        self.spec
    }

    pub fn stats(&self) -> LinkStats {
        let c = &self.counters;
        let chunks = c.chunks.load(Ordering::Relaxed);
        let late = c.late_ns.load(Ordering::Relaxed);
        LinkStats {
            connections: c.connections.load(Ordering::Relaxed),
            bytes_forward: c.bytes_forward.load(Ordering::Relaxed),
            bytes_back: c.bytes_back.load(Ordering::Relaxed),
            chunks,
            mean_late: Duration::from_nanos(late.checked_div(chunks).unwrap_or(0)),
            worst_late: Duration::from_nanos(c.worst_late_ns.load(Ordering::Relaxed)),
        }
    }
}

impl Drop for DelayLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        // The relaying threads end when their sockets do.
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(PoisonError::into_inner));
        for s in open.values().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    spec: LinkSpec,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    open: Open,
) {
    for (id, client) in listener.incoming().enumerate() {
        let id = id as u64;
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let server = match TcpStream::connect_timeout(&target, Duration::from_secs(10)) {
            Ok(s) => s,
            // As a host that can't be reached: the client sees the connection close.
            Err(_) => continue,
        };
        counters.connections.fetch_add(1, Ordering::Relaxed);
        for s in [&client, &server] {
            let _ = s.set_nodelay(true);
        }
        let clones = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        );
        let (Ok(c_read), Ok(s_write), Ok(c_keep), Ok(s_keep)) = clones else {
            continue;
        };
        open.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, [c_keep, s_keep]);
        let ended = Ended {
            id,
            open: open.clone(),
            directions: Arc::new(AtomicU8::new(0)),
        };
        let seed = u64::from(client.peer_addr().map_or(0, |a| a.port())) | 1;
        let ctx = |forward| Direction {
            spec,
            counters: counters.clone(),
            forward,
            ended: ended.clone(),
        };
        relay(c_read, s_write, ctx(true), seed);
        relay(server, client, ctx(false), seed ^ 0x9e37_79b9);
    }
}

/// What the reader hands the writer: bytes and when they are due, or the end.
enum Chunk {
    Bytes(Instant, Vec<u8>),
    End,
}

/// Forgets a connection once both of its directions have ended.
#[derive(Clone)]
struct Ended {
    id: u64,
    open: Open,
    directions: Arc<AtomicU8>,
}

impl Ended {
    fn one(&self) {
        if self.directions.fetch_add(1, Ordering::AcqRel) == 1 {
            self.open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&self.id);
        }
    }
}

/// What a direction's writer needs besides its sockets.
struct Direction {
    spec: LinkSpec,
    counters: Arc<Counters>,
    /// Towards the target.
    forward: bool,
    ended: Ended,
}

/// One direction: bytes read from `from` are written to `to` once due.
fn relay(mut from: TcpStream, mut to: TcpStream, d: Direction, seed: u64) {
    let spec = d.spec;
    let (tx, rx) = mpsc::channel::<Chunk>();
    let reader = move || {
        let mut rng = seed;
        let mut last = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = Instant::now();
            let wait = spec.one_way.saturating_sub(spec.jitter) + jitter(&mut rng, spec.jitter);
            let due = (now + wait).max(last);
            let due = due.max(now);
            last = due;
            if tx.send(Chunk::Bytes(due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
        let _ = tx.send(Chunk::End);
    };
    let writer = move || {
        let counters = &d.counters;
        precise_sleeps();
        while let Ok(chunk) = rx.recv() {
            match chunk {
                Chunk::Bytes(due, bytes) => {
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    let late = Instant::now().saturating_duration_since(due).as_nanos() as u64;
                    counters.chunks.fetch_add(1, Ordering::Relaxed);
                    counters.late_ns.fetch_add(late, Ordering::Relaxed);
                    counters.worst_late_ns.fetch_max(late, Ordering::Relaxed);
                    let moved = match d.forward {
                        true => &counters.bytes_forward,
                        false => &counters.bytes_back,
                    };
                    moved.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    if to.write_all(&bytes).is_err() {
                        break;
                    }
                }
                Chunk::End => break,
            }
        }
        // The other end sees the close once everything before it arrived.
        let _ = to.shutdown(Shutdown::Write);
        d.ended.one();
    };
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        let _ = std::thread::Builder::new()
            .name(name.to_owned())
            .stack_size(256 * 1024)
            .spawn(f);
    };
    spawn("link-read", Box::new(reader));
    spawn("link-write", Box::new(writer));
}

/// Uniform in [0, 2 x jitter] (added to the delay less `jitter`), from a xorshift state:
/// no need for a good generator.
fn jitter(state: &mut u64, jitter: Duration) -> Duration {
    if jitter.is_zero() {
        return Duration::ZERO;
    }
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let span = jitter.as_nanos() as u64;
    Duration::from_nanos(*state % (2 * span + 1))
}

/// The calling thread's sleeps end when asked: Linux otherwise lets them run up to
/// 50 µs late to batch wake-ups, which is half of a 0.1 ms link.
fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_timerslack(1) {
        tracing::debug!(%e, "timer slack stays at its default: link delays run late");
    }
}

/// Median round trip of `count` one-byte exchanges with an echo service at `addr`
/// (started by [`EchoServer`]), after a few to warm up.
pub fn round_trip(addr: SocketAddr, count: usize) -> Result<Duration> {
    let mut times = round_trips(addr, count)?;
    times.sort();
    Ok(times[times.len() / 2])
}

/// Every round trip of `count` one-byte exchanges with an echo service at `addr`, in
/// order, after a few to warm up.
pub fn round_trips(addr: SocketAddr, count: usize) -> Result<Vec<Duration>> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut times = Vec::with_capacity(count);
    let mut byte = [0u8; 1];
    for i in 0..count.max(1) + 5 {
        let t = Instant::now();
        s.write_all(b"x")?;
        s.read_exact(&mut byte)?;
        if i >= 5 {
            times.push(t.elapsed());
        }
    }
    Ok(times)
}

/// A loopback service that sends back every byte it gets: what [`round_trip`] measures
/// a link against.
pub struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl EchoServer {
    pub fn start() -> Result<EchoServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("echo".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(mut conn) = conn else { continue };
                    let _ = conn.set_nodelay(true);
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 4096];
                        while let Ok(n) = conn.read(&mut buf) {
                            if n == 0 || conn.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    });
                }
            })?;
        Ok(EchoServer { addr, stop })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// What a link costs by itself: the round trip through a link with no delay, less the
/// round trip straight to the same echo service (medians of `count`).
pub fn relay_cost(count: usize) -> Result<Duration> {
    let echo = EchoServer::start()?;
    let link = DelayLink::start(echo.addr(), LinkSpec::default())?;
    let direct = round_trip(echo.addr(), count)?;
    let through = round_trip(link.addr(), count)?;
    Ok(through.saturating_sub(direct))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_bounds() {
        let mut state = 12345;
        let j = Duration::from_micros(50);
        for _ in 0..1000 {
            assert!(jitter(&mut state, j) <= 2 * j);
        }
        assert_eq!(jitter(&mut state, Duration::ZERO), Duration::ZERO);
    }
}
