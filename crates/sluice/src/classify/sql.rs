//! SQL text analysis for the query cache: what a statement reads or writes, whether its result
//! may be cached, our cache hints and a normalized digest. Runs on every COM_QUERY the cache
//! sees, before it is forwarded, so it is a single hand-written lexer pass with no I/O.

mod analysis;
mod lexer;

pub use analysis::{
    analyze, digest, digest_hash, digest_shape, first_word, fnv1a, hints, strip_hints, Analysis,
    Hints, TableRef,
};
pub(crate) use lexer::{code_token, ident_text, is_one_of, Kind, Lexer, Tok};
