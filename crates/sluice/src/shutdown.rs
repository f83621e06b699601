//! Graceful shutdown: one signal that every wait selects on, and a drain that completes
//! when the last session holding a [`DrainGuard`] is gone.

use tokio::sync::{mpsc, watch};

/// Tells tasks to stop. Cloned into every task; `stopping()` resolves once triggered.
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }
}

impl Shutdown {
    pub fn is_stopping(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when shutdown has been triggered (immediately if it already was).
    pub async fn stopping(&mut self) {
        let _ = self.rx.wait_for(|s| *s).await;
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
