//! Core errors as JS errors: `.name` is the class the core's registry
//! names for the code, `.code` the code itself.

use callpost_core::Code;
#[cfg(any(feature = "client", feature = "webhooks"))]
use callpost_core::ErrorClass;
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

/// A JS error for `code`: a `TypeError` when the registry's base for its
/// class is `TypeError`, a plain `Error` otherwise.
pub(crate) fn error_value(code: Code, message: &str) -> JsValue {
    let class = code.class();
    let err: js_sys::Error = if class.base() == Some("TypeError") {
        js_sys::TypeError::new(message).into()
    } else {
        js_sys::Error::new(message)
    };
    err.set_name(class.name());
    // Setting a data property on a fresh Error cannot fail.
    let _ = Reflect::set(&err, &"code".into(), &code.as_str().into());
    err.into()
}

/// Any core error as a JS error.
#[cfg(any(feature = "client", feature = "webhooks"))]
pub(crate) fn js_err<E: Into<callpost_core::Error>>(e: E) -> JsValue {
    let e: callpost_core::Error = e.into();
    error_value(e.code(), &e.to_string())
}

/// [`js_err`] for the signing exports. It skips the umbrella
/// `core::Error`, whose `Display` spans every concern: through it, all of
/// their messages would stay in the verify-only module.
#[cfg(feature = "signing")]
pub(crate) fn sig_err(e: callpost_core::SignatureError) -> JsValue {
    error_value(e.code(), &e.to_string())
}

/// The API was called with an argument of the wrong type or shape
/// (`InvalidArgumentError`, code `invalid_argument`).
pub(crate) fn misuse(message: &str) -> JsValue {
    error_value(Code::InvalidArgument, message)
}

/// The class name and whether it is a `TypeError`, for errors the JS layer
/// raises itself (a value `JSON.stringify` would change, a failed
/// delivery): `[name, isTypeError]`, or undefined for an unknown code.
#[wasm_bindgen(js_name = errorClass)]
pub fn error_class(code: &str) -> JsValue {
    let Some(class) = Code::parse(code).map(Code::class) else {
        return JsValue::UNDEFINED;
    };
    let pair = js_sys::Array::of2(
        &class.name().into(),
        &(class.base() == Some("TypeError")).into(),
    );
    pair.into()
}

/// Every code and its class name, as JSON text (`{"invalid_json":
/// "JSONValueError", ...}`), for the test that walks the registry (in the
/// modules that raise more than signature errors).
#[cfg(any(feature = "client", feature = "webhooks"))]
#[wasm_bindgen(js_name = errorCodes)]
pub fn error_codes() -> String {
    let mut out = String::from("{");
    for (i, code) in Code::ALL.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "\"{}\":\"{}\"",
            code.as_str(),
            code.class().name()
        ));
    }
    out.push('}');
    out
}

/// Every class name the registry uses, for the same test.
#[cfg(any(feature = "client", feature = "webhooks"))]
#[wasm_bindgen(js_name = errorClasses)]
pub fn error_classes() -> Vec<String> {
    ErrorClass::ALL
        .iter()
        .map(|c| c.name().to_owned())
        .collect()
}
