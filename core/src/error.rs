//! The crate-wide error, for functions that can fail for several concerns.

use crate::audience::AudienceError;
use crate::batcher::{ConfigError, EnqueueError};
use crate::call::CallError;
use crate::delivery::StateError;
use crate::json::JsonError;
use crate::signature::SignatureError;
use crate::webhooks::SettingsError;

/// Any callpost error. Each concern keeps its own enum; this one wraps them
/// so a binding can map every failure through one [`Error::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A JSON value problem.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// A call that breaks the spec.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Bad destination settings.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A signing or verification input problem.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// An unusable audience name.
    #[error(transparent)]
    Audience(#[from] AudienceError),
    /// Bad batching-client settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A call the batcher did not queue.
    #[error(transparent)]
    Enqueue(#[from] EnqueueError),
    /// A saved delivery state that cannot be restored.
    #[error(transparent)]
    State(#[from] StateError),
    /// An endpoint index past the configured endpoints. Use an index below
    /// the number of endpoints.
    #[error("endpoint index {0} is out of range")]
    Endpoint(usize),
}

impl Error {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Json(e) => e.code(),
            Self::Call(e) => e.code(),
            Self::Settings(e) => e.code(),
            Self::Signature(e) => e.code(),
            Self::Audience(e) => e.code(),
            Self::Config(e) => e.code(),
            Self::Enqueue(e) => e.code(),
            Self::State(e) => e.code(),
            Self::Endpoint(_) => "endpoint_out_of_range",
        }
    }
}

impl From<crate::timestamp::TimestampError> for Error {
    fn from(e: crate::timestamp::TimestampError) -> Self {
        Error::Call(CallError::InvalidTimestamp(e))
    }
}
