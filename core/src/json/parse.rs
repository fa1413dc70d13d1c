//! A JSON parser with `JSON.parse`'s data model, and a scanner that
//! recognises objects already in `JSON.stringify` form so their text can be
//! kept as it is.
//!
//! Written here rather than parsing through serde_json because:
//!
//! * the JavaScript package hands the core `JSON.stringify` output, and the
//!   webhook body must contain that same text again. Building a tree only to
//!   write identical bytes back was a third of the time of a JS
//!   `Webhooks.request` (BENCHMARKS.md); the scanner checks the text instead
//!   of rebuilding it, which serde_json has no way to do;
//! * the rules JSON.parse and our writer impose (depth, integer range, lone
//!   surrogates) are checked where the token is read, with typed errors,
//!   instead of by matching serde_json's error messages;
//! * serde_json's generic deserializer was the largest single part of the
//!   wasm module.
//!
//! Numbers go through `str::parse::<f64>`, which is correctly rounded, so a
//! literal reads as the same double `JSON.parse` gives.

use super::{array_index, JsonError, Map, Value, MAX_DEPTH};
use std::borrow::Cow;

/// Each byte's value as a hex digit, or 0xFF for a byte that is not one.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The value of four hex digits: one table load per digit and one test for
/// all four. Text written by `json.dumps` (ensure_ascii, its default) is
/// mostly `\uXXXX` escapes, where a `to_digit` and an error check per digit
/// made this a sixth of the parse.
fn hex_value(four: &[u8]) -> Option<u32> {
    let &[a, b, c, d] = four else { return None };
    let digit = |h: u8| HEX_VALUE[h as usize];
    let (a, b, c, d) = (digit(a), digit(b), digit(c), digit(d));
    if (a | b | c | d) & 0xF0 != 0 {
        return None;
    }
    Some(u32::from(a) << 12 | u32::from(b) << 8 | u32::from(c) << 4 | u32::from(d))
}

/// Where the member at `keys` (a path of object keys, outermost first)
/// sits in the object `text`: the offsets of its key's opening quote, of
/// its value, and just past its value. Only the members on the way are
/// read; the others are skipped by their syntax. `None` when a key is
/// missing, a step is not an object, or the text is not an object.
pub(crate) fn member_span(text: &str, keys: &[String]) -> Option<(usize, usize, usize)> {
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'{') {
        return None;
    }
    let mut keys = keys;
    loop {
        let (first, rest) = keys.split_first()?;
        p.ws();
        if p.eat(b'}') {
            return None;
        }
        loop {
            p.ws();
            let key_at = p.pos;
            let key = p.string().ok()?;
            p.ws();
            if !p.eat(b':') {
                return None;
            }
            p.ws();
            let value_at = p.pos;
            if key == first.as_str() {
                if rest.is_empty() {
                    p.skip_value().ok()?;
                    return Some((key_at, value_at, p.pos));
                }
                if !p.eat(b'{') {
                    return None;
                }
                keys = rest;
                break;
            }
            p.skip_value().ok()?;
            p.ws();
            if !p.eat(b',') {
                return None;
            }
        }
    }
}

/// Where each element of the array `text` sits: the offsets of its start
/// and just past its end. The elements' syntax is skipped, not built.
/// `None` when the text is not an array or is malformed.
pub(crate) fn element_spans(text: &str) -> Option<Vec<(usize, usize)>> {
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'[') {
        return None;
    }
    let mut spans = Vec::new();
    p.ws();
    if p.eat(b']') {
        return Some(spans);
    }
    loop {
        p.ws();
        let at = p.pos;
        p.skip_value().ok()?;
        spans.push((at, p.pos));
        p.ws();
        if p.eat(b']') {
            return Some(spans);
        }
        if !p.eat(b',') {
            return None;
        }
    }
}

/// Where the value of member `key` of the object `text` starts. Only the
/// members before it are read (skipped by their syntax); the value itself
/// is not, nor anything after it. `None` when there is no such member or
/// the text is not an object.
pub(crate) fn member_start(text: &str, key: &str) -> Option<usize> {
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'{') {
        return None;
    }
    p.ws();
    if p.eat(b'}') {
        return None;
    }
    loop {
        p.ws();
        let found = p.string().ok()? == key;
        p.ws();
        if !p.eat(b':') {
            return None;
        }
        p.ws();
        if found {
            return Some(p.pos);
        }
        p.skip_value().ok()?;
        p.ws();
        if !p.eat(b',') {
            return None;
        }
    }
}

/// Where element `index` of the array `text` starts; the elements before
/// it are skipped by their syntax, nothing after its start is read.
pub(crate) fn element_start(text: &str, index: u32) -> Option<usize> {
    let mut p = Parser::new(text);
    p.ws();
    if !p.eat(b'[') {
        return None;
    }
    p.ws();
    if p.peek() == Some(b']') {
        return None;
    }
    for _ in 0..index {
        p.skip_value().ok()?;
        p.ws();
        if !p.eat(b',') {
            return None;
        }
        p.ws();
    }
    Some(p.pos)
}

/// Where the one value `text` starts with ends.
pub(crate) fn value_end(text: &str) -> Option<usize> {
    let mut p = Parser::new(text);
    p.ws();
    p.skip_value().ok()?;
    Some(p.pos)
}

/// A cursor over JSON text.
pub(crate) struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn error(&self, what: &str) -> JsonError {
        if self.pos >= self.text.len() {
            JsonError::InvalidJson(format!("unexpected end of input, {what}"))
        } else {
            JsonError::InvalidJson(format!("{what} at byte {}", self.pos))
        }
    }

    /// Skips JSON whitespace (space, tab, LF, CR; nothing else).
    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Consumes `b` if it is next.
    pub(crate) fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8, what: &str) -> Result<(), JsonError> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// After the value: only whitespace may follow.
    pub(crate) fn end(&mut self) -> Result<(), JsonError> {
        self.ws();
        if self.pos == self.text.len() {
            Ok(())
        } else {
            Err(self.error("trailing characters after the value"))
        }
    }

    /// Parses one value (with leading whitespace) whose nesting level is
    /// `depth` (the outermost value is level 1).
    pub(crate) fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.ws();
        match self.peek() {
            Some(b'{') => {
                if depth > MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.pos += 1;
                let mut map = Map::new();
                self.entries(|p, key| -> Result<(), JsonError> {
                    let v = p.value(depth + 1)?;
                    // An existing key keeps its place and takes the new
                    // value, as in JSON.parse.
                    map.insert(key.into_owned(), v);
                    Ok(())
                })?;
                Ok(Value::Object(map))
            }
            Some(b'[') => {
                if depth > MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat(b']') {
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b']') {
                        return Ok(Value::Array(items));
                    }
                    self.expect(b',', "expected ',' or ']'")?;
                }
            }
            Some(b'"') => Ok(Value::String(self.string()?.into_owned())),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            _ => Err(self.error("expected a value")),
        }
    }

    /// The members of an object whose `{` was just consumed: `each` is
    /// called with the parser positioned before each value and must consume
    /// it.
    pub(crate) fn entries<E: From<JsonError>>(
        &mut self,
        mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.ws();
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key").into());
            }
            let key = self.string()?;
            self.ws();
            self.expect(b':', "expected ':'")?;
            each(self, key)?;
            self.ws();
            if self.eat(b'}') {
                return Ok(());
            }
            self.expect(b',', "expected ',' or '}'")?;
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, JsonError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// The cursor's byte offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The text from byte `start` to the cursor.
    pub(crate) fn since(&self, start: usize) -> &'a str {
        &self.text[start..self.pos]
    }

    /// Moves past one value (after whitespace), checking JSON's syntax only:
    /// the value rules (depth, integer range, lone surrogates) are for the
    /// parse of each part to apply. Iterative, so no nesting can exhaust
    /// the stack. The ingest side splits a request into its calls with it.
    pub(crate) fn skip_value(&mut self) -> Result<(), JsonError> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'{') => {
                    self.pos += 1;
                    self.ws();
                    if !self.eat(b'}') {
                        open.push(b'{');
                        self.skip_key()?;
                        continue;
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.ws();
                    if !self.eat(b']') {
                        open.push(b'[');
                        continue;
                    }
                }
                Some(b'"') => self.skip_string()?,
                Some(b't') => self.skip_literal("true")?,
                Some(b'f') => self.skip_literal("false")?,
                Some(b'n') => self.skip_literal("null")?,
                Some(b'-' | b'0'..=b'9') => {
                    self.number_token()?;
                }
                _ => return Err(self.error("expected a value")),
            }
            // After a value: close what ends here, or go on to the next.
            loop {
                let Some(&container) = open.last() else {
                    return Ok(());
                };
                self.ws();
                let close = if container == b'{' { b'}' } else { b']' };
                if self.eat(close) {
                    open.pop();
                    continue;
                }
                if container == b'{' {
                    self.expect(b',', "expected ',' or '}'")?;
                    self.ws();
                    self.skip_key()?;
                } else {
                    self.expect(b',', "expected ',' or ']'")?;
                }
                break;
            }
        }
    }

    /// `"key":` inside an object, syntax only.
    fn skip_key(&mut self) -> Result<(), JsonError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string key"));
        }
        self.skip_string()?;
        self.ws();
        self.expect(b':', "expected ':'")
    }

    fn skip_literal(&mut self, word: &str) -> Result<(), JsonError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// A string at its opening quote, syntax only: escapes are well formed
    /// (a `\u` has four hex digits) and no control character is raw.
    fn skip_string(&mut self) -> Result<(), JsonError> {
        self.pos += 1;
        loop {
            self.plain_run();
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1;
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                Some(_) => return Err(self.error("control character in string")),
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    /// Moves past the ASCII digits at the cursor; returns how many.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Reads a number token per the JSON grammar. Returns the token and
    /// whether it is an integer literal (no fraction, no exponent).
    fn number_token(&mut self) -> Result<(&'a str, bool), JsonError> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid number")),
        }
        let mut integral = true;
        if self.eat(b'.') {
            integral = false;
            if self.digits() == 0 {
                return Err(self.error("expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integral = false;
            self.pos += 1;
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        Ok((&self.text[start..self.pos], integral))
    }

    fn number(&mut self) -> Result<f64, JsonError> {
        let (token, integral) = self.number_token()?;
        number_of(token, integral)
    }

    /// Reads a string at its opening quote.
    pub(crate) fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let (head, escaped) = self.string_head()?;
        if !escaped {
            return Ok(Cow::Borrowed(head));
        }
        let mut out = String::with_capacity(head.len() + 16);
        out.push_str(head);
        self.string_rest(&mut out)?;
        Ok(Cow::Owned(out))
    }

    /// Reads a string at its opening quote and writes it into `out` as
    /// `JSON.stringify` would: the transcoder's strings, escaped again as
    /// they are decoded, with no decoded copy in between: 8% fewer
    /// instructions than decoding to a `String` first on text of
    /// `json.dumps`' `\uXXXX` escapes, 3-7% on its other output
    /// (cachegrind).
    fn transcode_string(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let (head, escaped) = self.string_head()?;
        out.reserve(head.len() + 2);
        out.push(b'"');
        out.extend_from_slice(head.as_bytes());
        if escaped {
            self.string_rest(&mut Escaped(out))?;
        }
        out.push(b'"');
        Ok(())
    }

    /// At a string's opening quote: moves past the text before its first
    /// escape and returns it, with whether an escape follows (if not, the
    /// string has ended and the cursor is past it). Always inlined, as
    /// [`Parser::unicode_escape`] is, for its `Result`.
    #[inline(always)]
    fn string_head(&mut self) -> Result<(&'a str, bool), JsonError> {
        self.pos += 1;
        let start = self.pos;
        let end = self.plain_run();
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                Ok((&self.text[start..end], false))
            }
            Some(b'\\') => Ok((&self.text[start..end], true)),
            Some(_) => Err(self.error("control character in string")),
            None => Err(self.error("unterminated string")),
        }
    }

    /// The rest of a string from an escape, decoded into `sink`, up to and
    /// past its closing quote.
    fn string_rest(&mut self, sink: &mut impl Decoded) -> Result<(), JsonError> {
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            sink.char(self.unicode_escape()?);
                            continue;
                        }
                        _ => return Err(self.error("invalid escape")),
                    };
                    self.pos += 1;
                    sink.char(c);
                }
                Some(_) => {
                    let from = self.pos;
                    let to = self.plain_run();
                    if to == from {
                        return Err(self.error("control character in string"));
                    }
                    sink.text(&self.text[from..to]);
                }
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    /// Moves past bytes that need no attention in a string (anything but
    /// `"`, `\` and controls) and returns where they end. Those three are
    /// ASCII, so the end is always a char boundary.
    fn plain_run(&mut self) -> usize {
        self.pos = super::plain_until(self.bytes(), self.pos);
        self.pos
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        match self.bytes().get(self.pos..self.pos + 4).and_then(hex_value) {
            Some(n) => {
                self.pos += 4;
                Ok(n)
            }
            None => Err(self.hex4_error()),
        }
    }

    /// Out of line, so that the formatting stays out of the escape loop.
    #[cold]
    fn hex4_error(&self) -> JsonError {
        if self.pos + 4 > self.text.len() {
            self.error("unterminated \\u escape")
        } else {
            self.error("invalid \\u escape")
        }
    }

    /// After `\u`: a code point, joining a surrogate pair. Lone surrogates
    /// are refused: the body is UTF-8, which has no form for them. A high
    /// surrogate is only known to be lone once a byte other than the `\u`
    /// of its pair follows; text that ends first is an unterminated string,
    /// as serde_json also reports it.
    // Always inlined: out of line, the `Result` comes back through memory,
    // about 50 instructions per escape in text of `\uXXXX` escapes.
    #[inline(always)]
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let hi = self.hex4()?;
        let cp = match hi {
            0xD800..=0xDBFF => {
                match &self.bytes()[self.pos..] {
                    [b'\\', b'u', ..] => {}
                    [] | [b'\\'] => return Err(self.error("unterminated string")),
                    _ => return Err(JsonError::InvalidUnicode),
                }
                self.pos += 2;
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return Err(JsonError::InvalidUnicode);
                }
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(JsonError::InvalidUnicode),
            cp => cp,
        };
        // Not `ok_or(JsonError::InvalidUnicode)`: that builds the error and
        // drops it (an out-of-line call) on every escape, 11% of the
        // instructions of parsing text of `\uXXXX` escapes (cachegrind).
        match char::from_u32(cp) {
            Some(c) => Ok(c),
            None => Err(JsonError::InvalidUnicode),
        }
    }

    /// At a `{`: when the object is valid and already exactly
    /// `JSON.stringify(JSON.parse(text))` (and passes every check the tree
    /// parse applies), moves past it and returns its text. Otherwise leaves
    /// the cursor where it was and returns `None`; the caller then parses
    /// the tree, which also reports the error if there is one. `depth` is
    /// the object's nesting level, as for [`Parser::value`].
    pub(crate) fn canonical_object(&mut self, depth: usize) -> Option<&'a str> {
        if self.peek() != Some(b'{') {
            return None;
        }
        let start = self.pos;
        let mut keys = Vec::with_capacity(KEYS_ROOM);
        if self.scan_object(depth, &mut keys).is_some() {
            Some(&self.text[start..self.pos])
        } else {
            self.pos = start;
            None
        }
    }

    fn scan_value(&mut self, depth: usize, keys: &mut Vec<&'a [u8]>) -> Option<()> {
        match self.peek()? {
            b'{' => self.scan_object(depth, keys),
            b'[' => {
                if depth > MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                if self.eat(b']') {
                    return Some(());
                }
                loop {
                    self.scan_value(depth + 1, keys)?;
                    if self.eat(b']') {
                        return Some(());
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'"' => self.scan_string().map(drop),
            b't' => self.scan_literal("true"),
            b'f' => self.scan_literal("false"),
            b'n' => self.scan_literal("null"),
            _ => self.scan_number(),
        }
    }

    fn scan_literal(&mut self, word: &str) -> Option<()> {
        self.text[self.pos..].starts_with(word).then(|| {
            self.pos += word.len();
        })
    }

    fn scan_object(&mut self, depth: usize, keys: &mut Vec<&'a [u8]>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        if self.eat(b'}') {
            return Some(());
        }
        let first = keys.len();
        let mut last_index = None;
        let mut named = false;
        loop {
            if self.peek() != Some(b'"') {
                return None;
            }
            let key = self.scan_string()?;
            // JS lists array-index keys first, ascending. An index key has
            // only digits, so its raw text is the key itself. Other keys
            // skip the UTF-8 check that `array_index` needs its `&str` for:
            // it was a sixth of scanning a product list (cachegrind).
            let index = match key.first() {
                Some(b'0'..=b'9') => std::str::from_utf8(key).ok().and_then(array_index),
                _ => None,
            };
            match index {
                Some(i) => {
                    if named || last_index.is_some_and(|l| i <= l) {
                        return None;
                    }
                    last_index = Some(i);
                }
                None => named = true,
            }
            keys.push(key);
            if !self.eat(b':') {
                return None;
            }
            self.scan_value(depth + 1, keys)?;
            if self.eat(b'}') {
                // A repeated key collapses in JSON.parse. Canonical escapes
                // are one-to-one, so equal keys have equal raw text.
                let repeated = repeats(&keys[first..]);
                keys.truncate(first);
                return (!repeated).then_some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// A string whose escapes are exactly those `JSON.stringify` writes;
    /// returns the raw text between the quotes.
    fn scan_string(&mut self) -> Option<&'a [u8]> {
        self.pos += 1;
        let start = self.pos;
        loop {
            self.plain_run();
            match self.peek()? {
                b'"' => {
                    self.pos += 1;
                    return Some(&self.bytes()[start..self.pos - 1]);
                }
                b'\\' => {
                    let esc = self.bytes().get(self.pos + 1..)?;
                    self.pos += match esc {
                        [b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't', ..] => 2,
                        // \u00xx, lowercase, only for controls without a
                        // short form.
                        [b'u', b'0', b'0', h @ (b'0' | b'1'), l, ..]
                            if matches!(*l, b'0'..=b'9' | b'a'..=b'f')
                                && !matches!(
                                    (*h, *l),
                                    (b'0', b'8' | b'9' | b'a' | b'c' | b'd')
                                ) =>
                        {
                            6
                        }
                        _ => return None,
                    };
                }
                // A raw control character: invalid JSON.
                _ => return None,
            }
        }
    }

    fn scan_number(&mut self) -> Option<()> {
        let (token, integral) = self.number_token().ok()?;
        if prints_as_itself(token, integral) {
            return Some(());
        }
        let f: f64 = token.parse().ok()?;
        let mut out = Vec::with_capacity(32);
        super::write_number(f, &mut out).ok()?;
        (out == token.as_bytes()).then_some(())
    }

    /// At a `{`: writes the object in `JSON.stringify` form into `out` and
    /// moves past it, returning `true`. JSON from senders that indent or
    /// space their output, escape non-ASCII, or spell numbers their own way
    /// (`1e-07`, `25.0`) becomes the body's text in one pass, with no tree
    /// of the object built on the way. Returns `false`, with the cursor and
    /// `out` as they were, when the object (at any depth) has an
    /// array-index key or a repeated key: JavaScript reorders the first and
    /// collapses the second, which the tree parse does. Errors are the tree
    /// parse's, in the same order: both read every token with the same
    /// functions. `depth` is the object's nesting level, as for
    /// [`Parser::value`].
    pub(crate) fn transcode_object(
        &mut self,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, JsonError> {
        let (start, written) = (self.pos, out.len());
        let mut keys = Vec::with_capacity(KEYS_ROOM);
        let done = self.transcode_value(depth, out, &mut keys)?;
        if !done {
            self.pos = start;
            out.truncate(written);
        }
        Ok(done)
    }

    /// One value (after whitespace) into `out`; `false` as for
    /// [`Parser::transcode_object`]. `keys` holds the keys of the objects
    /// being written, outermost first.
    fn transcode_value(
        &mut self,
        depth: usize,
        out: &mut Vec<u8>,
        keys: &mut Vec<Cow<'a, str>>,
    ) -> Result<bool, JsonError> {
        self.ws();
        match self.peek() {
            Some(b'{') => {
                if depth > MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.pos += 1;
                out.push(b'{');
                let first = keys.len();
                let mut whole = true;
                self.entries(|p, key| -> Result<(), JsonError> {
                    if !whole || array_index(&key).is_some() {
                        // Falling back: read the rest only for its errors.
                        whole = false;
                        return p.value(depth + 1).map(drop);
                    }
                    if keys.len() > first {
                        out.push(b',');
                    }
                    write_str(&key, out);
                    out.push(b':');
                    keys.push(key);
                    whole = p.transcode_value(depth + 1, out, keys)?;
                    Ok(())
                })?;
                let whole = whole && {
                    let raw: Vec<&[u8]> = keys[first..].iter().map(|k| k.as_bytes()).collect();
                    !repeats(&raw)
                };
                keys.truncate(first);
                out.push(b'}');
                Ok(whole)
            }
            Some(b'[') => {
                if depth > MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.pos += 1;
                out.push(b'[');
                self.ws();
                if self.eat(b']') {
                    out.push(b']');
                    return Ok(true);
                }
                let mut whole = true;
                loop {
                    if whole {
                        whole = self.transcode_value(depth + 1, out, keys)?;
                    } else {
                        self.value(depth + 1)?;
                    }
                    self.ws();
                    if self.eat(b']') {
                        out.push(b']');
                        return Ok(whole);
                    }
                    self.expect(b',', "expected ',' or ']'")?;
                    out.push(b',');
                }
            }
            Some(b'"') => {
                self.transcode_string(out)?;
                Ok(true)
            }
            Some(b't') => self.literal("true", Value::Bool(true)).map(|_| {
                out.extend_from_slice(b"true");
                true
            }),
            Some(b'f') => self.literal("false", Value::Bool(false)).map(|_| {
                out.extend_from_slice(b"false");
                true
            }),
            Some(b'n') => self.literal("null", Value::Null).map(|_| {
                out.extend_from_slice(b"null");
                true
            }),
            Some(b'-' | b'0'..=b'9') => {
                let (token, integral) = self.number_token()?;
                if prints_as_itself(token, integral) {
                    out.extend_from_slice(token.as_bytes());
                } else {
                    super::write_number(number_of(token, integral)?, out)?;
                }
                Ok(true)
            }
            _ => Err(self.error("expected a value")),
        }
    }
}

/// Where [`Parser::string_rest`] puts a string's content as it decodes it:
/// plain runs (no `"`, `\\` or control character) and escaped characters.
trait Decoded {
    fn text(&mut self, s: &str);
    fn char(&mut self, c: char);
}

/// The decoded string itself.
impl Decoded for String {
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }
    fn char(&mut self, c: char) {
        self.push(c);
    }
}

/// The string as `JSON.stringify` writes it, into a body being transcoded.
struct Escaped<'o>(&'o mut Vec<u8>);

impl Decoded for Escaped<'_> {
    fn text(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }
    #[inline]
    fn char(&mut self, c: char) {
        super::write_char(c, self.0);
    }
}

/// Writes a decoded string as `JSON.stringify` does. The parser's strings
/// are borrowed exactly when the source had no escape, and then hold no
/// `"`, `\` or control character: their text is copied as it is.
// The variant, not only the text, is the information: Borrowed means the
// source had no escape.
#[allow(clippy::ptr_arg)]
fn write_str(s: &Cow<'_, str>, out: &mut Vec<u8>) {
    match s {
        Cow::Borrowed(raw) => {
            out.reserve(raw.len() + 2);
            out.push(b'"');
            out.extend_from_slice(raw.as_bytes());
            out.push(b'"');
        }
        Cow::Owned(decoded) => super::write_string(decoded, out),
    }
}

/// The room the object scans reserve for keys at first: the keys of the
/// objects open at once (a call's `properties` and one product in its
/// list) fit, where growing from nothing takes three allocations.
const KEYS_ROOM: usize = 32;

/// Whether an object's keys hold one twice. Up to 16 keys, a key is
/// compared with the earlier ones only when its tag (one of 64 bits, from
/// its length and first and last bytes) was already seen; more keys are
/// sorted. Sorting rather than hashing keeps the worst case (an object of
/// many keys chosen to collide, from an attacker) at O(n log n) with no
/// random hash keys, which the core has no source for. The sort is a
/// heap's (`BinaryHeap::into_sorted_vec`): `sort_unstable`'s added 9 KB to
/// each wasm module.
fn repeats(keys: &[&[u8]]) -> bool {
    // 64 tags stay sparse for this many keys.
    const FEW: usize = 16;
    if keys.len() <= FEW {
        // Comparing every pair costs an eighth of the wasm request for an
        // order of 100 products of 12 keys (Node's profiler); with tags,
        // each product's 12 keys have 12 different tags and none is compared.
        let mut seen = 0u64;
        return keys.iter().enumerate().any(|(i, k)| {
            let first = k.first().map_or(0, |&b| u32::from(b));
            let last = k.last().map_or(0, |&b| u32::from(b));
            let bit = 1u64 << ((first * 31 + last * 7 + k.len() as u32) % 64);
            let maybe = seen & bit != 0;
            seen |= bit;
            maybe && keys[..i].contains(k)
        });
    }
    // First a sort of one word per key, built from its length and its
    // first and last eight bytes: cheap to move and compare, and equal keys
    // give equal words, so when no two words are equal (nearly always) no
    // two keys are. Sorting the keys themselves was over half the
    // instructions of parsing an identify with 200 traits (cachegrind).
    // Equal words, by a repeat or by collision, fall back to the keys.
    let print = |k: &[u8]| -> u64 {
        let mut head = [0u8; 8];
        let mut tail = [0u8; 8];
        let n = k.len().min(8);
        head[..n].copy_from_slice(&k[..n]);
        tail[..n].copy_from_slice(&k[k.len() - n..]);
        u64::from_le_bytes(head) ^ u64::from_le_bytes(tail).rotate_left(29) ^ k.len() as u64
    };
    let prints: Vec<u64> = keys.iter().map(|k| print(k)).collect();
    let prints = std::collections::BinaryHeap::from(prints).into_sorted_vec();
    if !prints.windows(2).any(|w| w[0] == w[1]) {
        return false;
    }
    let sorted = std::collections::BinaryHeap::from(keys.to_vec()).into_sorted_vec();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// The double a number token denotes, with the core's rules: integer
/// literals that fit 64 bits must print back with the same digits
/// (`integer_out_of_range` otherwise), longer ones read as the nearest
/// double, as in `JSON.parse`, and a literal beyond the double range is
/// refused (it would be Infinity, which has no JSON form).
fn number_of(token: &str, integral: bool) -> Result<f64, JsonError> {
    if integral {
        // 15 digits stay below 2^53: exact, and no range question.
        if token.len() <= 15 {
            if let Ok(n) = token.parse::<i64>() {
                return Ok(n as f64);
            }
        }
        // Literals that fit 64 bits get the integer rule (module docs);
        // longer ones read as the nearest double, as in JSON.parse.
        if let Ok(n) = token.parse::<i128>() {
            if (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&n) {
                return match Value::from_i128(n)? {
                    Value::Number(f) => Ok(f),
                    _ => Err(JsonError::IntegerOutOfRange(token.to_owned())),
                };
            }
        }
    }
    let f: f64 = token
        .parse()
        .map_err(|_| JsonError::InvalidJson(format!("invalid number {token}")))?;
    if f.is_finite() {
        Ok(f)
    } else {
        Err(JsonError::InvalidJson(format!(
            "number out of range: {token}"
        )))
    }
}

/// Whether a number token is already what `JSON.stringify` prints for the
/// double it denotes, decided from its text alone (see
/// [`short_decimal_prints_as_itself`]); `false` is never wrong, only slower.
fn prints_as_itself(token: &str, integral: bool) -> bool {
    // Short integers print as themselves (the grammar already refused
    // leading zeros), except "-0", which prints as "0".
    (integral && token.len() <= 15 && token != "-0") || short_decimal_prints_as_itself(token)
}

/// Whether a number token with a fraction and no exponent is already what
/// `JSON.stringify` prints for it, decided from its digits alone: parsing a
/// double and printing it back cost more than the rest of the scan for
/// prices and rates. True for at most 15 significant digits, no trailing
/// zero in the fraction, and fixed notation:
///
/// * Every decimal of 15 or fewer significant digits comes back from the
///   nearest double unchanged (`DBL_DIG` is 15), so two of them never share
///   a double. The shortest form that reads back as the same double
///   therefore has these same digits, and no fewer.
/// * ECMAScript (Number::toString) prints fixed notation from 1e-6 up to
///   1e21. 15 digits with a non-zero integer part stay under 1e15; with a
///   zero one, at most five zeros may follow the point (0.000001 prints
///   so, 0.0000001 as 1e-7).
///
/// Anything else (exponents, trailing zeros, longer numbers) takes the
/// parse-and-print comparison; `false` here is never wrong, only slower.
pub(crate) fn short_decimal_prints_as_itself(token: &str) -> bool {
    let unsigned = token.strip_prefix('-').unwrap_or(token).as_bytes();
    let Some(dot) = unsigned.iter().position(|&b| b == b'.') else {
        return false;
    };
    let (int, frac) = (&unsigned[..dot], &unsigned[dot + 1..]);
    // An exponent shows here as a non-digit after the point.
    if !frac.iter().all(u8::is_ascii_digit) || frac.last().is_none_or(|&b| b == b'0') {
        return false;
    }
    let significant = if int == b"0" {
        let zeros = frac.iter().take_while(|&&b| b == b'0').count();
        if zeros > 5 {
            return false;
        }
        frac.len() - zeros
    } else {
        int.len() + frac.len()
    };
    significant <= 15
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn short_decimals_are_judged_by_their_digits() {
        let itself = [
            "0.5",
            "-0.5",
            "129.95",
            "9.6",
            "0.000001",
            "-0.000123",
            "12345678901234.5",
            "0.123456789012345",
            "1.00000000000001",
        ];
        let not = [
            "1.0",
            "0.0",
            "-0.0",
            "1.50",
            "0.0000001",
            "1234567890123456.5",
            "0.1234567890123456",
            "1.5e3",
            "15",
            "-7",
            "1.5E3",
        ];
        for t in itself {
            assert!(short_decimal_prints_as_itself(t), "{t}");
            let mut out = Vec::new();
            super::super::write_number(t.parse().unwrap(), &mut out).unwrap();
            assert_eq!(out, t.as_bytes());
        }
        for t in not {
            assert!(!short_decimal_prints_as_itself(t), "{t}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

        /// Whenever the digit rule says "prints as itself", JavaScript's
        /// own algorithm (ryu-js) prints the parsed double as that text.
        #[test]
        fn the_digit_rule_agrees_with_javascript(
            neg in proptest::bool::ANY,
            int in "(0|[1-9][0-9]{0,16})",
            frac in "[0-9]{0,17}[1-9]",
        ) {
            let t = format!("{}{int}.{frac}", if neg { "-" } else { "" });
            if short_decimal_prints_as_itself(&t) {
                let f: f64 = t.parse().unwrap();
                let mut js = ryu_js::Buffer::new();
                proptest::prop_assert_eq!(js.format(f), t.as_str());
            }
        }
    }

    fn canonical(text: &str) -> bool {
        let mut p = Parser::new(text);
        p.canonical_object(1).is_some_and(|t| t.len() == text.len())
    }

    #[test]
    fn canonical_forms_are_recognised() {
        for t in [
            "{}",
            r#"{"a":1}"#,
            r#"{"1":0,"2":[],"b":{"c":[true,false,null]},"a":-5}"#,
            r#"{"s":"q\"\\\b\f\n\r\t\u0001\u001f\u000b é😀"}"#,
            r#"{"n":[0,1.5,-0.1,1e+21,1.5e-7,123456789012345680000,10000000000000000]}"#,
        ] {
            assert!(canonical(t), "{t}");
        }
    }

    #[test]
    fn non_canonical_forms_fall_back() {
        for t in [
            r#"{ "a":1}"#,
            r#"{"a": 1}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"b":1,"1":2}"#,
            r#"{"2":1,"1":2}"#,
            r#"{"1":1,"1":2}"#,
            r#"{"a":1.0}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":1E5}"#,
            r#"{"a":100000000000000000000000}"#,
            r#"{"a":9007199254740993}"#,
            r#"{"a":1e400}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"a":"\u000A"}"#,
            r#"{"a":"\u000a"}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\ud800"}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":tru}"#,
            r#"{"a":1,}"#,
            r#"{"a"}"#,
            r#"{"a":[1,]}"#,
        ] {
            assert!(!canonical(t), "{t}");
        }
    }

    #[test]
    fn many_keys_use_the_set_and_still_catch_duplicates() {
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let ok = format!("{{{}}}", keys.join(","));
        assert!(canonical(&ok));
        let dup = format!("{{{},\"k3\":0}}", keys.join(","));
        assert!(!canonical(&dup));
    }

    #[test]
    fn keys_alike_at_both_ends_are_still_told_apart() {
        // Same length and the same first and last eight bytes: one word per
        // key cannot tell them apart, the keys themselves can.
        let keys: Vec<String> = (0..40)
            .map(|i| format!("\"abcdefgh_{:02}_12345678\":{i}", i))
            .collect();
        let distinct = format!("{{{}}}", keys.join(","));
        assert!(canonical(&distinct));
        assert!(!canonical(&format!(
            "{{{},\"abcdefgh_07_12345678\":0}}",
            keys.join(",")
        )));
        let spaced = distinct.replace(':', ": ");
        let mut p = Parser::new(&spaced);
        let mut out = Vec::new();
        assert!(p.transcode_object(1, &mut out).unwrap());
        assert_eq!(out, distinct.as_bytes());
    }

    #[test]
    fn repeats_agrees_with_a_set_at_every_size() {
        // Keys of one to three bytes from four letters: tags collide and
        // keys repeat often, on both sides of the 16-key limit.
        let mut state = 7u32;
        let mut next = || {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 16) as usize
        };
        let letters = [b'a', b'b', b'y', 0xc3];
        let (mut with, mut without) = (0, 0);
        for n in 0..=40 {
            for _ in 0..200 {
                let keys: Vec<Vec<u8>> = (0..n)
                    .map(|_| (0..1 + next() % 3).map(|_| letters[next() % 4]).collect())
                    .collect();
                let slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let set: std::collections::BTreeSet<&[u8]> = slices.iter().copied().collect();
                let repeated = set.len() < n;
                assert_eq!(repeats(&slices), repeated, "{keys:?}");
                if repeated {
                    with += 1;
                } else {
                    without += 1;
                }
            }
        }
        assert!(with > 1000 && without > 1000, "{with} {without}");
    }

    #[test]
    fn transcoding_falls_back_for_index_and_repeated_keys_at_any_size() {
        let transcode = |text: &str| {
            let mut out = Vec::new();
            let mut p = Parser::new(text);
            let done = p.transcode_object(1, &mut out).unwrap();
            (done, String::from_utf8(out).unwrap(), p.pos)
        };
        assert_eq!(
            transcode("{ \"a\" : 1.50, \"b\": [1e-07, \"\\u00e9\"] }"),
            (true, r#"{"a":1.5,"b":[1e-7,"é"]}"#.to_owned(), 38)
        );
        for n in [3, 40] {
            let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
            let fine = format!("{{{}}}", keys.join(", "));
            assert!(transcode(&fine).0, "{n} keys");
            for bad in ["\"k1\": 0", "\"k\\u0031\": 0", "\"7\": 0"] {
                let (done, out, pos) = transcode(&format!("{{{}, {bad}}}", keys.join(", ")));
                assert_eq!((done, out.as_str(), pos), (false, "", 0), "{n} keys, {bad}");
            }
        }
    }

    #[test]
    fn scan_starts_only_at_an_object() {
        for t in ["}}", "[]", "", "\"{}\""] {
            assert!(Parser::new(t).canonical_object(1).is_none(), "{t}");
        }
    }

    #[test]
    fn scan_respects_depth() {
        let nest = |n: usize| "{\"a\":".repeat(n) + "1" + &"}".repeat(n);
        assert!(Parser::new(&nest(MAX_DEPTH)).canonical_object(1).is_some());
        assert!(Parser::new(&nest(MAX_DEPTH + 1))
            .canonical_object(1)
            .is_none());
    }
}
