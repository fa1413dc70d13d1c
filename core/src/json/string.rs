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

/// The bytes of `x` (little-endian) that are below 0x20, `"` or `\\`, each
/// flagged by its high bit (the classic SWAR zero-byte and less-than
/// tests). A byte above a flagged one may be flagged wrongly, by a borrow;
/// the lowest flag is always exact, so it locates the first such byte.
#[inline]
fn special_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    below_space | zero(x ^ (ONES * b'"' as u64)) | zero(x ^ (ONES * b'\\' as u64))
}

/// Whether any of the eight bytes in `x` is below 0x20, `"` or `\\`.
#[inline]
fn needs_escape(x: u64) -> bool {
    special_bytes(x) != 0
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
        let special = special_bytes(u64::from_le_bytes(chunk));
        if special != 0 {
            // The word's first flagged byte, without a loop over its bytes:
            // keys and short values end within a word or two, and the byte
            // loop after the word was a tenth of scanning a product list.
            return i + (special.trailing_zeros() / 8) as usize;
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

/// Eight bytes as a little-endian word.
#[inline]
fn word(eight: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(eight);
    u64::from_le_bytes(w)
}

/// Strings up to this long take [`write_string`]'s word-at-a-time check.
const SHORT: usize = 64;

/// Whether a string of at most [`SHORT`] bytes holds a byte that needs an
/// escape, eight at a time; the last partial word is padded with a byte
/// that needs none.
#[inline]
fn short_needs_escape(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if needs_escape(u64::from_le_bytes(word)) {
            return true;
        }
    }
    let rest = chunks.remainder();
    let mut word = [b'a'; 8];
    word[..rest.len()].copy_from_slice(rest);
    needs_escape(u64::from_le_bytes(word))
}

/// Writes a quoted string escaped exactly as `JSON.stringify` escapes it.
pub fn write_string(s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    // Most strings in a payload are short keys and values with nothing to
    // escape. Up to 16 bytes they are read as two overlapping words, checked
    // there, and stored with fixed-size copies, which compile to plain
    // loads and stores where a slice copy calls memcpy: 165 -> 120
    // instructions per 11-byte string (callgrind, 640,000 strings).
    if (8..=16).contains(&bytes.len()) {
        let (head, tail) = (word(&bytes[..8]), word(&bytes[bytes.len() - 8..]));
        if !needs_escape(head) && !needs_escape(tail) {
            let at = out.len();
            out.extend_from_slice(&[b'"'; 18]);
            out[at + 1..at + 9].copy_from_slice(&head.to_le_bytes());
            out[at + 1 + bytes.len() - 8..at + 1 + bytes.len()]
                .copy_from_slice(&tail.to_le_bytes());
            out.truncate(at + 2 + bytes.len());
            return;
        }
    } else if bytes.len() < 8 {
        let mut padded = [b'a'; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        if !needs_escape(word(&padded)) {
            let at = out.len();
            out.extend_from_slice(&[b'"'; 10]);
            out[at + 1..at + 9].copy_from_slice(&padded);
            out[at + 1 + bytes.len()] = b'"';
            out.truncate(at + 2 + bytes.len());
            return;
        }
    } else if bytes.len() <= SHORT && !short_needs_escape(bytes) {
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut start = 0;
    loop {
        let i = plain_until(bytes, start);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        out.extend_from_slice(&bytes[start..i]);
        write_escape(b, out);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The escape `JSON.stringify` writes for `b`, a byte its [`ESCAPE`] entry
/// marks.
fn write_escape(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
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
}

/// One character of a string's content, as `JSON.stringify` writes it
/// (escaped or as it is); the quotes are the caller's.
#[inline]
pub(crate) fn write_char(c: char, out: &mut Vec<u8>) {
    if !c.is_ascii() {
        // A fixed length per arm, so each copy is a few stores: copying the
        // encoded slice was a call to memcpy per character, an eighth of
        // the instructions of transcoding text of `\uXXXX` escapes.
        let mut buf = [0; 4];
        match c.encode_utf8(&mut buf).len() {
            2 => out.extend_from_slice(&buf[..2]),
            3 => out.extend_from_slice(&buf[..3]),
            _ => out.extend_from_slice(&buf),
        }
        return;
    }
    let b = c as u8; // ASCII
    if ESCAPE[b as usize] == 0 {
        out.push(b);
    } else {
        write_escape(b, out);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::json::{stringify, write_string, Value};

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

    #[test]
    fn plain_until_stops_at_the_first_byte_needing_attention() {
        use crate::json::plain_until;
        // Every special byte at every position, over the word, tail and
        // block paths, from several starts, with another special byte at
        // the end (a borrow in the word tests must not move the answer)
        // and plain bytes both ASCII and not.
        for len in 1..=150 {
            for pos in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                    for filler in [b'x', 0xC3] {
                        let mut bytes = vec![filler; len];
                        bytes[len - 1] = 0x01;
                        bytes[pos] = special;
                        for from in 0..=pos.min(9) {
                            assert_eq!(plain_until(&bytes, from), pos, "{bytes:?} from {from}");
                        }
                    }
                }
            }
        }
        for len in 0..=150 {
            assert_eq!(plain_until(&vec![b'x'; len], 0), len);
        }
    }

    #[test]
    fn every_length_and_position_escapes_like_the_plain_loop() {
        // A reference written char by char, as JSON.stringify describes it.
        fn reference(s: &str) -> String {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        for len in 0..=72 {
            for pos in 0..=len {
                for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', 'é', '\u{7f}'] {
                    let s: String = (0..len)
                        .map(|i| if i == pos { special } else { 'x' })
                        .collect();
                    let mut out = Vec::new();
                    write_string(&s, &mut out);
                    assert_eq!(String::from_utf8(out).unwrap(), reference(&s), "{s:?}");
                }
            }
        }
    }
}
