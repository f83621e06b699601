//! tls (being written)
