//! sandbox (being written)
