//! frontend (being written)
