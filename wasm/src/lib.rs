//! wasm-bindgen bindings over `callpost-core`, for the JS layer in
//! `js/api.mjs`, which is the package's public API: these exports are its
//! private half. Values cross as JSON text or UTF-8 bytes (one copy;
//! `JSON.stringify` runs natively in the JS engine) or as plain numbers;
//! times are `number`s of milliseconds, never `bigint`. Each export
//! converts, calls the core once and converts back; the rules, limits and
//! defaults are the core's. The files mirror the core's modules.
//!
//! The exports come in three features, so the npm package can give each
//! kind of user only the module they need (link-time optimisation drops
//! what no export reaches):
//! * `signing` (`signature.rs`): sign, verify, `Signer`. Alone, it is the
//!   `callpost/verify` module for webhook receivers.
//! * `client` (`batcher.rs`): the batching client. With `call.rs`, it is
//!   the `callpost/client` module for apps that send calls from a browser.
//! * `webhooks` (`webhooks.rs`, `delivery.rs`, `audience.rs`): webhook
//!   requests, deliveries, audiences.
//!
//! The default `full` feature is all three: the main `callpost` module.

// The exports are `pub` items in private modules: `#[wasm_bindgen]` and
// `#[pyclass]`/`#[pyfunction]` export them by their own means, not through
// Rust visibility.
#![allow(unreachable_pub)]

use callpost_core as core;
use wasm_bindgen::prelude::*;

mod error;
#[cfg(any(feature = "client", feature = "webhooks"))]
mod util;

#[cfg(feature = "webhooks")]
mod audience;
#[cfg(feature = "client")]
mod batcher;
#[cfg(any(feature = "client", feature = "webhooks"))]
mod call;
#[cfg(feature = "webhooks")]
mod delivery;
#[cfg(any(feature = "client", feature = "webhooks"))]
mod json;
#[cfg(feature = "webhooks")]
mod oauth;
#[cfg(feature = "signing")]
mod receive;
#[cfg(feature = "signing")]
mod signature;
#[cfg(feature = "signing")]
mod standard;
#[cfg(any(feature = "client", feature = "webhooks"))]
mod timestamp;
#[cfg(feature = "webhooks")]
mod webhooks;

/// callpost's version (the Rust workspace's), the npm package's too.
#[wasm_bindgen]
pub fn version() -> String {
    core::VERSION.to_owned()
}

/// The core's limits and defaults as JSON text: `{"flushAt": 20, ...}`,
/// camelCase, durations in ms.
#[cfg(any(feature = "client", feature = "webhooks"))]
#[wasm_bindgen]
pub fn defaults() -> String {
    defaults_json(core::DEFAULTS)
}

/// `(name, value)` pairs as a camelCase JSON object.
#[cfg(any(feature = "client", feature = "webhooks"))]
fn defaults_json(pairs: &[(&str, u64)]) -> String {
    let map: core::Map = pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), core::Value::Number(*value as f64)))
        .collect();
    // Numbers below 2^53 and short names: writing cannot fail.
    core::KeyCase::Camel
        .apply(core::Value::Object(map))
        .to_json_string()
        .unwrap_or_default()
}

/// Constant strings the JS layer and its users need.
#[wasm_bindgen(js_name = userAgent)]
pub fn user_agent() -> String {
    core::webhooks::USER_AGENT.to_owned()
}
