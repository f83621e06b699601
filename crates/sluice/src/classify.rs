//! classify (being written)
