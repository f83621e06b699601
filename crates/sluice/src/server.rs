//! server (being written)
