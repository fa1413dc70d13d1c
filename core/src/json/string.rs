//! Strings: `JSON.stringify`'s escaping, and the scan for bytes that need
//! it, shared by the writer and the parser.

use std::fmt;

// 0 = copy as is; otherwise the escape to write. `u` means \u00xx.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Whether any of the eight bytes in `x` is below 0x20, `"` or `\\`
/// (the classic SWAR zero-byte and less-than tests; exact about whether
/// such a byte exists).
#[inline]
fn needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
    below_space || has_zero(x ^ (ONES * b'"' as u64)) || has_zero(x ^ (ONES * b'\\' as u64))
}

/// Bytes per step of [`plain_until`]'s vector scan, and how far its
/// eight-byte scan goes before switching to it.
const SCAN_BLOCK: usize = 64;

/// The index of the first byte at or after `i` that a JSON string cannot
/// hold as it is (`"`, `\\` or a control character), or `bytes.len()`. The
/// writer escapes there; the parser's string scan stops there. All three
/// are ASCII, so the index is always a char boundary.
#[inline]
pub(crate) fn plain_until(bytes: &[u8], mut i: usize) -> usize {
    // Eight bytes at a time (SWAR): most strings are keys and short values,
    // and end within 64 bytes, where the block scan's setup showed (a
    // 423-byte body: 346 -> 321 ns without it, one run). A run that gets
    // past 64 plain bytes goes through `skip_blocks` once, out of this hot
    // loop, which then finishes it.
    let mut blocks_from = i.saturating_add(SCAN_BLOCK);
    while let Some(Ok(chunk)) = bytes.get(i..i + 8).map(<[u8; 8]>::try_from) {
        if needs_escape(u64::from_le_bytes(chunk)) {
            break;
        }
        i += 8;
        if i >= blocks_from {
            #[cfg(any(target_feature = "sse2", target_feature = "neon"))]
            {
                i = skip_blocks(bytes, i);
            }
            blocks_from = usize::MAX;
        }
    }
    while let Some(&b) = bytes.get(i) {
        if ESCAPE[b as usize] != 0 {
            break;
        }
        i += 1;
    }
    i
}

/// For [`plain_until`], past 64 plain bytes: skips 64 bytes at a time while
/// none needs attention. The test is a branch-free OR over a fixed-size
/// block, which LLVM turns into vector compares (the workspace forbids
/// `unsafe`, so no hand-written intrinsics). 64, not 32: the reduction and
/// branch run half as often, and a 32 KB scan went from 2.53 to 1.12 µs in
/// a standalone A/B (128 gave 1.01). Only where vectors are baseline:
/// wasm32 without simd128 would run it byte by byte, slower than the SWAR,
/// so there it is not called.
#[cfg(any(target_feature = "sse2", target_feature = "neon"))]
fn skip_blocks(bytes: &[u8], mut i: usize) -> usize {
    while let Some(Ok(block)) = bytes
        .get(i..i + SCAN_BLOCK)
        .map(<&[u8; SCAN_BLOCK]>::try_from)
    {
        let mut hit = false;
        for &b in block {
            hit |= (b < 0x20) | (b == b'"') | (b == b'\\');
        }
        if hit {
            break;
        }
        i += SCAN_BLOCK;
    }
    i
}

/// A string shown in an error message, as a JSON string literal. Not
/// `{:?}`: the Python and JS users who see these messages write strings
/// this way, the three languages then print the same text (a shared error
/// vector checks it), and `str`'s Debug escaper stays out of the wasm
/// modules (0.9 KB raw).
pub(crate) struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        write_string(self.0, &mut out);
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// Writes a quoted string escaped exactly as `JSON.stringify` escapes it.
pub fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = plain_until(bytes, start);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        out.extend_from_slice(&bytes[start..i]);
        match ESCAPE[b as usize] {
            b'u' => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
            esc => out.extend_from_slice(&[b'\\', esc]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::json::{stringify, Value};

    fn s(v: &Value) -> String {
        stringify(v).unwrap()
    }

    #[test]
    fn strings_escape_like_js() {
        let v = Value::String("q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é😀\u{2028}".into());
        assert_eq!(
            s(&v),
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é😀\u{2028}\""
        );
    }
}
