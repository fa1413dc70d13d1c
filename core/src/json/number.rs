//! Numbers as ECMAScript's `Number::toString` prints them.

use super::JsonError;

/// Writes a finite double as ECMAScript `Number::toString` does.
pub fn write_number(n: f64, out: &mut Vec<u8>) -> Result<(), JsonError> {
    if !n.is_finite() {
        return Err(JsonError::NonFiniteNumber);
    }
    if n == 0.0 {
        // Covers -0, which JS prints as "0".
        out.push(b'0');
        return Ok(());
    }
    // Integral values below 1e15 print as plain digits in ECMAScript, exactly
    // as an i64 does; itoa is several times faster than the general path,
    // and most numbers in analytics payloads are such counts and ids.
    // (`as i64` truncates, so comparing back tests integrality without the
    // call to libm's `trunc` that `fract` makes.)
    if n.abs() < 1e15 && n as i64 as f64 == n {
        out.extend_from_slice(itoa::Buffer::new().format(n as i64).as_bytes());
        return Ok(());
    }
    write_shortest(n, out);
    Ok(())
}

/// The shortest digits that read back as `n` (zmij, the formatter
/// serde_json uses; faster than ryu-js), laid out as ECMAScript
/// `Number::toString` lays them out. zmij writes plain decimals only inside
/// JavaScript's plain range and the same `e+21`/`e-7` exponent form
/// outside it, so only its `.0` suffix and the exponents JavaScript writes
/// out in full need changing.
fn write_shortest(n: f64, out: &mut Vec<u8>) {
    let mut buf = zmij::Buffer::new();
    let s = buf.format_finite(n).as_bytes();
    let Some(e) = s.iter().position(|&b| b == b'e') else {
        out.extend_from_slice(s.strip_suffix(b".0").unwrap_or(s));
        return;
    };
    let exp: i32 = std::str::from_utf8(&s[e + 1..])
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // ECMAScript writes x = 0.d₁d₂… × 10^point in full when
    // -6 < point ≤ 21, that is for exponents -7 < exp < 21.
    if !(-7 < exp && exp < 21) {
        out.extend_from_slice(s);
        return;
    }
    let (sign, mantissa) = match s[..e].split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, &s[..e]),
    };
    if sign {
        out.push(b'-');
    }
    let digits: Vec<u8> = mantissa.iter().copied().filter(|&b| b != b'.').collect();
    let k = digits.len() as i32;
    let point = exp + 1;
    if point >= k {
        out.extend_from_slice(&digits);
        out.resize(out.len() + (point - k) as usize, b'0');
    } else if point > 0 {
        out.extend_from_slice(&digits[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[point as usize..]);
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-point) as usize, b'0');
        out.extend_from_slice(&digits);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::json::{stringify, Value};

    fn s(v: &Value) -> String {
        stringify(v).unwrap()
    }

    #[test]
    fn numbers_follow_ecmascript() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e16, "10000000000000000"),
            (-25.0, "-25"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ];
        for (n, want) in cases {
            assert_eq!(s(&Value::Number(n)), want, "{n:?}");
        }
    }

    #[test]
    fn non_finite_is_rejected() {
        for n in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                stringify(&Value::Number(n)).unwrap_err().code(),
                "non_finite_number"
            );
        }
    }
}
