//! Shared by the `client` and `webhooks` exports: options objects, HTTP
//! outcomes and requests to JS.

use crate::error::{js_err, misuse};
use callpost_core as core;
use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

pub(crate) fn set(o: &Object, k: &str, v: impl Into<JsValue>) {
    let _ = Reflect::set(o, &k.into(), &v.into());
}

/// A request as `{method, url, headers: [[name, value]], body}`; the body
/// as a string, which fetch encodes back to the same bytes.
pub(crate) fn request_object(r: core::Request) -> Result<JsValue, JsValue> {
    let o = Object::new();
    set(&o, "method", r.method);
    set(&o, "url", r.url);
    let headers = Array::new();
    for (k, v) in r.headers {
        headers.push(&Array::of2(&JsValue::from(&*k), &JsValue::from(&*v)));
    }
    set(&o, "headers", headers);
    // Bodies are UTF-8 JSON the core wrote; if one ever were not, the caller
    // gets an error rather than a body that goes out signed over other bytes.
    let body = String::from_utf8(r.body).map_err(|_| js_err(core::JsonError::InvalidUnicode))?;
    set(&o, "body", body);
    Ok(o.into())
}

/// Reads the optional fields of a JS options object. Type conversion only:
/// the defaults and limits are the core's.
pub(crate) struct Options(Option<Object>);

impl Options {
    pub(crate) fn of(v: &JsValue) -> Result<Self, JsValue> {
        if v.is_undefined() || v.is_null() {
            return Ok(Self(None));
        }
        v.dyn_ref::<Object>()
            .map(|o| Self(Some(o.clone())))
            .ok_or_else(|| misuse("options must be an object"))
    }

    fn get(&self, key: &str) -> Option<JsValue> {
        let v = Reflect::get(self.0.as_ref()?, &key.into()).ok()?;
        (!v.is_undefined() && !v.is_null()).then_some(v)
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, JsValue> {
        self.get(key)
            .map(|v| {
                v.as_string()
                    .ok_or_else(|| misuse(&format!("{key} must be a string")))
            })
            .transpose()
    }

    /// A count or a duration in ms: a whole number from 0 to 2^53.
    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, JsValue> {
        self.get(key)
            .map(|v| match v.as_f64() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_992.0 => {
                    Ok(n as u64)
                }
                _ => Err(misuse(&format!(
                    "{key} must be a whole number from 0 to 2^53"
                ))),
            })
            .transpose()
    }

    /// Replaces `slot` (a core default) when the option is given.
    pub(crate) fn set_uint<T: TryFrom<u64>>(&self, key: &str, slot: &mut T) -> Result<(), JsValue> {
        if let Some(v) = self.uint(key)? {
            *slot = T::try_from(v).map_err(|_| misuse(&format!("{key} is out of range")))?;
        }
        Ok(())
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn set_string(&self, key: &str, slot: &mut String) -> Result<(), JsValue> {
        if let Some(v) = self.string(key)? {
            *slot = v;
        }
        Ok(())
    }
}

/// A host's report of an HTTP attempt, as the core's outcome.
pub(crate) fn outcome_of(
    status: Option<u16>,
    retry_after: Option<String>,
    error: Option<String>,
    message: Option<String>,
) -> Result<core::Outcome, JsValue> {
    core::Outcome::from_report(
        status,
        retry_after,
        error.as_deref(),
        &message.unwrap_or_default(),
    )
    .map_err(js_err)
}
