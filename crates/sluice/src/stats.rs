//! stats (being written)
