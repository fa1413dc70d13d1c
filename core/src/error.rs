//! The crate-wide [`Error`]: every concern's error enum in one, so a
//! binding maps any failure through one [`Error::code`].
//!
//! No module of the crate returns it: it sits above every module it wraps,
//! and each module returns its own enum (`core/tests/layers.rs` keeps it
//! so). The codes themselves are in [`crate::code`].

use crate::audience::AudienceError;
use crate::batcher::{ConfigError, EnqueueError};
use crate::call::CallError;
use crate::delivery::StateError;
use crate::ingest::IngestError;
use crate::json::JsonError;
use crate::protection::ProtectionError;
use crate::receive::ReceiveError;
use crate::signature::SignatureError;
use crate::standard::StandardError;
use crate::timestamp::TimestampError;
use crate::webhooks::{RequestError, SettingsError};

pub use crate::code::{Code, ErrorClass};
pub use crate::misuse::ApiMisuse;

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
    /// The API was called wrongly.
    #[error(transparent)]
    Misuse(#[from] ApiMisuse),
    /// A Tracking API request refused as a whole.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// Receiver protection settings that cannot be used.
    #[error(transparent)]
    Protection(#[from] ProtectionError),
    /// A Standard Webhooks secret or request that does not verify.
    #[error(transparent)]
    Standard(#[from] StandardError),
    /// A destination's mapping could not build a call's body.
    #[error(transparent)]
    Map(#[from] crate::mapping::MapError),
    /// A destination's URL template had no value for a call.
    #[error(transparent)]
    UrlValue(#[from] crate::mapping::UrlValueError),
    /// An OAuth 2.0 endpoint's token could not be had.
    #[error(transparent)]
    Token(#[from] crate::oauth::TokenError),
}

impl From<ReceiveError> for Error {
    fn from(e: ReceiveError) -> Self {
        match e {
            ReceiveError::Signature(e) => Self::Signature(e),
            ReceiveError::Json(e) => Self::Json(e),
            ReceiveError::Standard(e) => Self::Standard(e),
        }
    }
}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Call(e) => Self::Call(e),
            RequestError::Misuse(e) => Self::Misuse(e),
            RequestError::MappedBodyTooLarge => Self::Map(crate::mapping::MapError::TooLarge),
            RequestError::InvalidUrlValue(e) => Self::UrlValue(e),
        }
    }
}

impl Error {
    /// The stable code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::Json(e) => e.code(),
            Self::Call(e) => e.code(),
            Self::Settings(e) => e.code(),
            Self::Signature(e) => e.code(),
            Self::Audience(e) => e.code(),
            Self::Config(e) => e.code(),
            Self::Enqueue(e) => e.code(),
            Self::State(e) => e.code(),
            Self::Misuse(e) => e.code(),
            Self::Ingest(e) => e.code(),
            Self::Protection(e) => e.code(),
            Self::Map(e) => e.code(),
            Self::UrlValue(e) => e.code(),
            Self::Standard(e) => e.code(),
            Self::Token(e) => e.code(),
        }
    }

    /// The class the code is raised as.
    pub fn class(&self) -> ErrorClass {
        self.code().class()
    }
}

impl From<TimestampError> for Error {
    fn from(e: TimestampError) -> Self {
        Self::Call(CallError::InvalidTimestamp(e))
    }
}
