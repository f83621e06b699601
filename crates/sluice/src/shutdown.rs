//! shutdown (being written)
