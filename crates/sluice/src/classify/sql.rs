//! SQL text analysis for the query cache: what a statement reads or writes, whether its result
//! may be cached, our cache hints and a normalized digest. Runs on every COM_QUERY the cache
//! sees, before it is forwarded, so it is a single hand-written lexer pass with no I/O.

mod analysis;
mod digest;
mod hints;
mod keywords;
mod lexer;
mod scan;
mod statements;

pub use analysis::{analyze, Analysis, TableRef};
pub use digest::{digest, digest_hash, digest_shape, fnv1a};
pub use hints::{first_word, hints, strip_hints, Hints};
pub(crate) use lexer::{code_token, ident_text, is_one_of, Kind, Lexer, Tok};
