//! Errors in how the API is called, as opposed to in the data.

use crate::code::Code;

/// The API was used wrongly (after rustls's `ApiMisuse`): nothing about
/// the data is wrong, the caller is. Every variant's code is
/// `invalid_argument`; the message says what to pass instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiMisuse {
    /// An endpoint index past the configured endpoints. Use an index below
    /// the number of endpoints.
    #[error("endpoint index {0} is out of range")]
    EndpointOutOfRange(usize),
    /// A host's report of an HTTP attempt that is neither a status nor one
    /// of the error kinds `timeout`, `connection` and `tls`.
    #[error("give either a status, or error 'timeout' | 'connection' | 'tls'")]
    InvalidOutcome,
    /// Random bytes of the wrong length. Pass exactly this many.
    #[error("random must be exactly {0} bytes")]
    RandomLength(usize),
    /// A binding-level argument of the wrong type or shape; the message
    /// names it and what it must be.
    #[error("{0}")]
    Argument(String),
}

impl ApiMisuse {
    /// Always [`Code::InvalidArgument`].
    pub fn code(&self) -> Code {
        Code::InvalidArgument
    }
}
