//! The pool's key: which idle connections can serve a lease.

use crate::auth::BackendCredentials;
use crate::backend::ConnParams;
use sluice_wire::handshake::Attributes;
use std::sync::Arc;

/// Which idle connections can serve a lease: same backend login, same wire format.
/// Cheap to clone and to hash, since multiplexed sessions lease per statement.
#[derive(Clone, Debug)]
pub struct PoolKey {
    pub creds: Arc<BackendCredentials>,
    pub params: ConnParams,
    /// A client's connection attributes, which its connections carry (sessions that
    /// own their connection); none for Sluice's own.
    pub attributes: Option<Arc<Attributes>>,
    hash: u64,
}

impl PoolKey {
    pub fn new(creds: Arc<BackendCredentials>, params: ConnParams) -> PoolKey {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        creds.hash(&mut h);
        params.hash(&mut h);
        PoolKey {
            creds,
            params,
            attributes: None,
            hash: h.finish(),
        }
    }

    /// The key of connections opened with a client's attributes: the server records
    /// them at login and never after, so only a session with the same ones may reuse
    /// such a connection.
    pub fn with_attributes(mut self, attributes: Arc<Attributes>) -> PoolKey {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash.hash(&mut h);
        attributes.hash(&mut h);
        self.hash = h.finish();
        self.attributes = Some(attributes);
        self
    }
}

impl PartialEq for PoolKey {
    fn eq(&self, other: &PoolKey) -> bool {
        self.hash == other.hash
            && self.params == other.params
            && self.attributes == other.attributes
            && (Arc::ptr_eq(&self.creds, &other.creds) || self.creds == other.creds)
    }
}

impl Eq for PoolKey {}

impl std::hash::Hash for PoolKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}
