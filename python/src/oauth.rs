//! An OAuth 2.0 endpoint's bearer token (the core's `oauth::TokenSource`),
//! for the package's senders: the Python side runs the token request.

use crate::delivery::os_seed;
use crate::error::err;
use crate::timestamp::millis;
use callpost_core as core;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The token request to send: `(url, headers, body, deadline_ms)`.
type TokenRequest<'py> = (
    String,
    Vec<(&'static str, String)>,
    Bound<'py, PyBytes>,
    i64,
);

/// One grant's token, fetched, cached and refreshed (sans I/O).
#[pyclass(module = "callpost._callpost")]
pub struct TokenSource {
    inner: core::oauth::TokenSource,
}

impl TokenSource {
    /// A source for the OAuth 2.0 grant of `ep`, if it has one.
    pub(crate) fn of(ep: &core::webhooks::Endpoint, seed: Option<u64>) -> PyResult<Option<Self>> {
        let Some(core::webhooks::Auth::OAuth2(grant)) = ep.auth() else {
            return Ok(None);
        };
        let seed = match seed {
            Some(s) => s,
            None => os_seed()?,
        };
        Ok(Some(Self {
            inner: core::oauth::TokenSource::new(grant.clone(), seed),
        }))
    }
}

#[pymethods]
impl TokenSource {
    /// The token request to send now, or None (a token is kept, one is
    /// being fetched, or a failure's backoff runs).
    fn poll_request<'py>(
        &mut self,
        py: Python<'py>,
        now_ms: i64,
    ) -> PyResult<Option<TokenRequest<'py>>> {
        Ok(self.inner.poll_request(millis(now_ms)?).map(|r| {
            (
                r.url,
                r.headers,
                PyBytes::new(py, &r.body),
                r.deadline.as_millis(),
            )
        }))
    }

    /// The token endpoint's answer: its status and (the start of) its body.
    /// Raises DeliveryError (`token_unavailable`) when it is not a token.
    fn handle_response(&mut self, now_ms: i64, status: u16, body: &[u8]) -> PyResult<()> {
        self.inner
            .handle_response(millis(now_ms)?, status, body)
            .map_err(err)
    }

    /// The token request failed without an answer.
    fn handle_failure(&mut self, now_ms: i64, message: &str) -> PyResult<()> {
        self.inner.handle_failure(millis(now_ms)?, message);
        Ok(())
    }

    /// `Bearer …` to send now. Raises DeliveryError (`token_unavailable`)
    /// with the last failure when there is no token.
    fn authorization(&self, now_ms: i64) -> PyResult<String> {
        self.inner
            .authorization(millis(now_ms)?)
            .map(str::to_owned)
            .map_err(err)
    }

    /// A receiver answered 401 to a request sent with `authorization`.
    fn handle_rejected(&mut self, authorization: &str) {
        self.inner.handle_rejected(authorization);
    }

    /// The most bytes of a token answer to read.
    #[classattr]
    const ANSWER_BYTES: usize = core::oauth::TOKEN_ANSWER_BYTES;

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}
