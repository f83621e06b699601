//! Instants as plain numbers, for state kept in atomics: microseconds since the first
//! time anything in the process asked. One epoch for all of them, so two such numbers
//! compare.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Microseconds from the epoch to now.
pub fn micros() -> u64 {
    EPOCH.elapsed().as_micros() as u64
}

/// The instant `micros` after the epoch.
pub fn at(micros: u64) -> Instant {
    *EPOCH + Duration::from_micros(micros)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_instant_survives_the_number() {
        let before = std::time::Instant::now();
        let n = super::micros();
        let at = super::at(n);
        assert!(at <= std::time::Instant::now());
        assert!(at + std::time::Duration::from_micros(1) >= before);
    }
}
