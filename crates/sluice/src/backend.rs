//! backend (being written)
