//! [`Secret`], the one leaf type several configuration sections share (passwords,
//! tokens). Below everything else in the crate: it imports nothing of the proxy, so a
//! subsystem's section can use it without reaching back up to [`crate::config`].

use serde::Deserialize;

/// A password or token: never printed, never logged.
#[derive(Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value() {
        assert_eq!(format!("{:?}", Secret("hunter2".into())), "Secret(***)");
    }
}
