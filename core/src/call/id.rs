//! The id rule: the string an id field holds for each kind of value.

use super::{CallError, Scalar};
use crate::json::{write_number, JsonError};

/// The top-level fields that hold identifiers, in [`CALL_FIELDS`] order.
/// [`id_string`] decides what each holds; the JS layer hands it these
/// fields' numbers and bigints before it writes a call as JSON text.
///
/// [`CALL_FIELDS`]: super::CALL_FIELDS
pub const ID_FIELDS: [&str; 5] = [
    "userId",
    "anonymousId",
    "groupId",
    "previousId",
    "messageId",
];

/// `Number.MAX_SAFE_INTEGER`: up to here every integer is its own double,
/// so a JS `number` this size still holds the digits its caller wrote.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The id that id field `field` (one of [`ID_FIELDS`]) holds for `v`, or
/// `None` when `v` is null (the field is absent).
///
/// Ids are identifiers, not numbers, so the JavaScript precision rule that
/// protects numeric values does not apply to them:
///
/// * an integer the host holds exactly ([`Scalar::Integer`]: a Python
///   `int`, a JS `bigint`) is its exact decimal string, whatever its size,
///   as segment-analytics-python's `stringify_id` sends it
///   (`157963456373623802` → `"157963456373623802"`);
/// * a host double ([`Scalar::Float`]: a JS `number`, a Python `float`) is
///   its decimal string when it is a safe integer (`Number.isSafeInteger`);
///   beyond that the double may no longer hold the digits its caller wrote
///   (`157963456373623802` is already `157963456373623800` in JS), so it is
///   `integer_out_of_range`; with a fraction (`1.5`) it is no identifier
///   and is `invalid_field` (Python's `str` and JavaScript's `String` would
///   not even agree on its digits: `1.5e-07` against `1.5e-7`);
/// * a JSON number read from JSON text ([`Scalar::Number`]) keeps the JSON
///   rule it was read under: an integer literal JavaScript would read as
///   another number was already refused (`integer_out_of_range`), and any
///   other number becomes the string `String(n)` gives in JavaScript
///   (`42` → `"42"`, `1.5` → `"1.5"`), the id a JavaScript receiver
///   parsing the same text would make of it. `messageId` takes no number
///   from JSON text: Segment's libraries always send it as a string;
/// * anything else (a boolean, an array, an object) is `invalid_field`.
pub fn id_string(field: &'static str, v: Scalar<'_>) -> Result<Option<String>, CallError> {
    let invalid = |expected, got| CallError::InvalidField {
        field,
        expected,
        got,
    };
    match v {
        Scalar::Null => Ok(None),
        Scalar::Str(s) => Ok(Some(s.to_owned())),
        Scalar::Integer(digits) if is_decimal_integer(digits) => Ok(Some(digits.to_owned())),
        Scalar::Integer(_) => Err(invalid("an integer in decimal", "malformed integer")),
        Scalar::Float(f) if !f.is_finite() => Err(JsonError::NonFiniteNumber.into()),
        Scalar::Float(f) if f.fract() != 0.0 => {
            Err(invalid("a string or an integer", "fractional number"))
        }
        Scalar::Float(f) if f.abs() <= MAX_SAFE_INTEGER => {
            // In range: |f| < 2^53 is exact as an i64 (and -0 prints "0").
            Ok(Some(itoa::Buffer::new().format(f as i64).to_owned()))
        }
        Scalar::Float(f) => {
            let mut printed = Vec::with_capacity(24);
            write_number(f, &mut printed)?;
            Err(JsonError::IntegerOutOfRange(String::from_utf8_lossy(&printed).into_owned()).into())
        }
        Scalar::Number(n) if field != "messageId" => {
            let mut out = Vec::with_capacity(24);
            write_number(n, &mut out)?;
            Ok(Some(String::from_utf8_lossy(&out).into_owned()))
        }
        other => Err(invalid(
            if field == "messageId" {
                "a string"
            } else {
                "a string or number"
            },
            other.type_name(),
        )),
    }
}

/// Whether `s` is an integer in canonical decimal: `-?[0-9]+` without
/// leading zeros, `0` itself unsigned. Bindings pass what the host's own
/// formatting made; this keeps a wrong conversion from becoming an id.
fn is_decimal_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    match digits.as_bytes() {
        [] => false,
        [b'0'] => digits.len() == s.len(),
        [b'0', ..] => false,
        d => d.iter().all(u8::is_ascii_digit),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(v: Scalar<'_>) -> Result<Option<String>, &'static str> {
        id_string("userId", v).map_err(|e| e.code().as_str())
    }

    #[test]
    fn decimal_integers_are_canonical() {
        for ok in [
            "0",
            "7",
            "-7",
            "10",
            "157963456373623802",
            "-1000000000000000000000000000000",
        ] {
            assert!(is_decimal_integer(ok), "{ok}");
        }
        for bad in [
            "", "-", "-0", "00", "01", "-01", "+1", "1.0", "1e3", " 1", "1 ", "١",
        ] {
            assert!(!is_decimal_integer(bad), "{bad:?}");
        }
        assert_eq!(id(Scalar::Integer("01")), Err("invalid_field"));
    }

    #[test]
    fn host_integers_keep_every_digit() {
        let big = "1000000000000000000000000000000";
        assert_eq!(id(Scalar::Integer(big)).unwrap().as_deref(), Some(big));
        assert_eq!(
            id(Scalar::Integer("-9007199254740993")).unwrap().as_deref(),
            Some("-9007199254740993")
        );
    }

    #[test]
    fn host_doubles_are_ids_only_while_safe_integers() {
        let max = 9_007_199_254_740_991.0;
        assert_eq!(
            id(Scalar::Float(max)).unwrap().as_deref(),
            Some("9007199254740991")
        );
        assert_eq!(
            id(Scalar::Float(-max)).unwrap().as_deref(),
            Some("-9007199254740991")
        );
        assert_eq!(id(Scalar::Float(-0.0)).unwrap().as_deref(), Some("0"));
        assert_eq!(id(Scalar::Float(max + 1.0)), Err("integer_out_of_range"));
        assert_eq!(id(Scalar::Float(1e16)), Err("integer_out_of_range"));
        assert_eq!(id(Scalar::Float(1.5)), Err("invalid_field"));
        assert_eq!(id(Scalar::Float(f64::NAN)), Err("non_finite_number"));
    }

    #[test]
    fn json_numbers_keep_their_javascript_string_form() {
        assert_eq!(id(Scalar::Number(1.5)).unwrap().as_deref(), Some("1.5"));
        assert_eq!(id(Scalar::Number(1e21)).unwrap().as_deref(), Some("1e+21"));
        assert_eq!(
            id_string("messageId", Scalar::Number(5.0))
                .unwrap_err()
                .code()
                .as_str(),
            "invalid_field"
        );
        assert_eq!(
            id_string("messageId", Scalar::Integer("5"))
                .unwrap()
                .as_deref(),
            Some("5")
        );
    }
}
