//! Graceful shutdown: one signal that every wait selects on, and a drain that completes
//! when the last session holding a [`DrainGuard`] is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};

/// Tells tasks to stop. Cloned into every task; `stopping()` resolves once triggered.
/// A flag and a `Notify` rather than a watch channel: every idle session waits on it,
/// and its wait is half the size (80 bytes of each session's task, not 160).
#[derive(Clone)]
pub struct Shutdown {
    signal: Arc<Signal>,
}

struct Signal {
    stopping: AtomicBool,
    /// A successor took the listeners over: sessions go to it once they can
    /// (`frontend/session/moving.rs`), before the drain's end stops the rest.
    moving: AtomicBool,
    notify: Notify,
}

pub struct ShutdownTrigger {
    signal: Arc<Signal>,
}

pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let signal = Arc::new(Signal {
        stopping: AtomicBool::new(false),
        moving: AtomicBool::new(false),
        notify: Notify::new(),
    });
    (
        ShutdownTrigger {
            signal: signal.clone(),
        },
        Shutdown { signal },
    )
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.signal.stopping.store(true, Ordering::SeqCst);
        self.signal.notify.notify_waiters();
    }

    /// Tells sessions to move to the successor: wakes those waiting for their client.
    pub fn start_moving(&self) {
        self.signal.moving.store(true, Ordering::SeqCst);
        self.signal.notify.notify_waiters();
    }
}

impl Shutdown {
    pub fn is_stopping(&self) -> bool {
        self.signal.stopping.load(Ordering::SeqCst)
    }

    pub fn is_moving(&self) -> bool {
        self.signal.moving.load(Ordering::SeqCst)
    }

    /// Resolves when shutdown has been triggered (immediately if it already was).
    pub async fn stopping(&mut self) {
        // The notice also tells sessions to move: that is not the end.
        loop {
            // Made before the flag is read: a trigger in between still wakes it.
            let notified = self.signal.notify.notified();
            if self.is_stopping() {
                return;
            }
            notified.await;
        }
    }

    /// Resolves when shutdown has been triggered, or sessions were told to move and
    /// the caller had not seen it (`seen_moving`): at once if either already holds.
    pub async fn stopping_or_moving(&mut self, seen_moving: bool) {
        let notified = self.signal.notify.notified();
        if self.is_stopping() || (self.is_moving() && !seen_moving) {
            return;
        }
        notified.await;
    }
}

/// Held by every running session; the drain completes when all are dropped.
#[derive(Clone)]
pub struct DrainGuard {
    _tx: mpsc::Sender<()>,
}

pub struct Drain {
    rx: mpsc::Receiver<()>,
    tx: Option<mpsc::Sender<()>>,
}

impl Drain {
    pub fn new() -> Drain {
        let (tx, rx) = mpsc::channel(1);
        Drain { rx, tx: Some(tx) }
    }

    pub fn guard(&self) -> DrainGuard {
        DrainGuard {
            _tx: self
                .tx
                .clone()
                .expect("guards are handed out before waiting"),
        }
    }

    /// Waits until every guard is dropped.
    pub async fn wait(mut self) {
        self.tx.take();
        let _ = self.rx.recv().await;
    }
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_stops_whether_it_waited_before_the_trigger_or_after() {
        let (trigger, shutdown) = channel();
        assert!(!shutdown.is_stopping());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let mut s = shutdown.clone();
                tokio::spawn(async move { s.stopping().await })
            })
            .collect();
        // Each waiter is parked on the signal before it is given.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        trigger.trigger();
        for w in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(5), w)
                .await
                .expect("a waiter was not woken")
                .unwrap();
        }
        let mut late = shutdown.clone();
        assert!(late.is_stopping());
        tokio::time::timeout(std::time::Duration::from_secs(5), late.stopping())
            .await
            .expect("already stopping: resolves at once");
    }

    #[tokio::test]
    async fn moving_wakes_the_waits_for_it_and_not_the_waits_for_the_end() {
        let (trigger, shutdown) = channel();
        let mut stopper = shutdown.clone();
        let stopping = tokio::spawn(async move { stopper.stopping().await });
        let mut mover = shutdown.clone();
        let moving = tokio::spawn(async move { mover.stopping_or_moving(false).await });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        trigger.start_moving();
        tokio::time::timeout(std::time::Duration::from_secs(5), moving)
            .await
            .expect("moving did not wake its waiter")
            .unwrap();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!stopping.is_finished(), "moving ended a wait for the end");
        // One that saw the move waits for the end only.
        let mut seen = shutdown.clone();
        let after = tokio::spawn(async move { seen.stopping_or_moving(true).await });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!after.is_finished());
        trigger.trigger();
        for w in [stopping, after] {
            tokio::time::timeout(std::time::Duration::from_secs(5), w)
                .await
                .expect("the end did not wake a waiter")
                .unwrap();
        }
    }
}
