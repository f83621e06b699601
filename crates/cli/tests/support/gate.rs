//! A loopback TCP relay in front of one server that a test can close like a network
//! partition: while closed, nothing crosses it either way and new connections are taken
//! but never answered, as when packets are dropped (not refused). What the server and
//! its other clients see does not change: only what comes through the gate is cut off.
//! Opened again, held bytes flow on, as TCP delivers them after a short partition.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a parked relay thread looks again at the gate and at the end of the test.
const TICK: Duration = Duration::from_millis(20);

pub struct Gate {
    addr: SocketAddr,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct State {
    closed: AtomicBool,
    ended: AtomicBool,
    relays: Mutex<Vec<JoinHandle<()>>>,
    sockets: Mutex<Vec<TcpStream>>,
}

impl Gate {
    /// A gate on a free loopback port, open, in front of `to`.
    pub fn new(to: SocketAddr) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a gate");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let s = state.clone();
        let acceptor = std::thread::spawn(move || accept(listener, to, s));
        Gate {
            addr,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// Where clients connect to reach the server through the gate.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn close(&self) {
        self.state.closed.store(true, Ordering::SeqCst);
    }

    pub fn open(&self) {
        self.state.closed.store(false, Ordering::SeqCst);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.state.ended.store(true, Ordering::SeqCst);
        for s in self.state.sockets.lock().unwrap().iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for r in std::mem::take(&mut *self.state.relays.lock().unwrap()) {
            let _ = r.join();
        }
    }
}

impl State {
    /// Waits while the gate is closed; false once the test is over.
    fn pass(&self) -> bool {
        while self.closed.load(Ordering::SeqCst) {
            if self.ended.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(TICK);
        }
        !self.ended.load(Ordering::SeqCst)
    }
}

fn accept(listener: TcpListener, to: SocketAddr, state: Arc<State>) {
    while !state.ended.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(TICK);
                continue;
            }
            Err(_) => return,
        };
        let s = state.clone();
        let relay = std::thread::spawn(move || connect(client, to, s));
        state.relays.lock().unwrap().push(relay);
    }
}

/// Reaches the server once the gate lets the connection through, then relays both ways.
fn connect(client: TcpStream, to: SocketAddr, state: Arc<State>) {
    client.set_nonblocking(false).unwrap();
    state
        .sockets
        .lock()
        .unwrap()
        .push(client.try_clone().unwrap());
    if !state.pass() {
        return;
    }
    let Ok(server) = TcpStream::connect(to) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    state
        .sockets
        .lock()
        .unwrap()
        .push(server.try_clone().unwrap());
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let s = state.clone();
    let back = std::thread::spawn(move || copy(s2, c2, &s));
    copy(client, server, &state);
    let _ = back.join();
}

/// Copies `from` to `to` while the gate is open; a chunk read as the gate closes waits
/// in the relay for it to open.
fn copy(mut from: TcpStream, mut to: TcpStream, state: &State) {
    from.set_read_timeout(Some(TICK)).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if !state.pass() {
            return;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        if !state.pass() || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
