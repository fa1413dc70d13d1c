//! Our JSON writer against the real `JSON.stringify` of the `node` on PATH,
//! over a generated corpus of random values.
// Test code: a panic is how it reports, and it may print.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    clippy::print_stdout
)]

use callpost_core::{Map, Value};
use std::process::Command;

const CASES: usize = 12_000;

/// SplitMix64: a tiny seeded generator, so every run checks the same corpus.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const PIECES: &[&str] = &[
    "a",
    "key",
    "Zoë",
    "日本語",
    "😀",
    "👩‍👩‍👧",
    "\u{0}",
    "\u{1}",
    "\u{8}",
    "\u{9}",
    "\n",
    "\u{b}",
    "\u{c}",
    "\r",
    "\u{1f}",
    "\u{7f}",
    "\u{80}",
    "\u{2028}",
    "\u{2029}",
    "\u{fffd}",
    "\u{feff}",
    "\"",
    "\\",
    "/",
    " ",
    "<",
    "&",
    "é",
    "\u{10ffff}",
];
const KEYS: &[&str] = &[
    "0",
    "1",
    "12",
    "4294967294",
    "4294967295",
    "01",
    "-1",
    "1.5",
    "10",
    "9",
    "00",
    "a1",
    "__proto__x",
];

fn string(rng: &mut Rng) -> String {
    (0..rng.below(6)).map(|_| *rng.pick(PIECES)).collect()
}

fn number(rng: &mut Rng) -> f64 {
    loop {
        let n = match rng.below(8) {
            0 => f64::from_bits(rng.next()),
            1 => -0.0,
            2 => (rng.next() as i64 >> rng.below(60)) as f64,
            3 => (rng.below(2_000_001) as f64 - 1e6) / 1000.0,
            4 => 10f64.powi(rng.below(600) as i32 - 300) * (rng.below(9) + 1) as f64,
            5 => (rng.below(1 << 53)) as f64 * 2f64.powi(rng.below(80) as i32 - 40),
            6 => 1.0 / (rng.below(1000) + 1) as f64,
            _ => rng.below(100) as f64,
        };
        if n.is_finite() {
            return n;
        }
    }
}

fn value(rng: &mut Rng, depth: u32) -> Value {
    let leaf = depth >= 5 || rng.below(3) == 0;
    match if leaf { rng.below(4) } else { 4 + rng.below(2) } {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::Number(number(rng)),
        3 => Value::String(string(rng)),
        4 => Value::Array((0..rng.below(5)).map(|_| value(rng, depth + 1)).collect()),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(7) {
                let k = if rng.below(2) == 0 {
                    (*rng.pick(KEYS)).to_owned()
                } else {
                    string(rng)
                };
                m.insert(k, value(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

fn program(v: &Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::Null => json!(["n"]),
        Value::Bool(b) => json!(["b", b]),
        Value::Number(n) => json!(["d", format!("{:016x}", n.to_bits())]),
        Value::String(s) => json!(["s", hex::encode(s)]),
        Value::Array(a) => json!(["a", a.iter().map(program).collect::<Vec<_>>()]),
        Value::Object(m) => {
            json!([
                "o",
                m.iter()
                    .map(|(k, v)| json!([hex::encode(k), program(v)]))
                    .collect::<Vec<_>>()
            ])
        }
    }
}

#[test]
fn stringify_equals_node_json_stringify() {
    let mut rng = Rng(0x5eed_c0ff_ee00_0001);
    let mut lines = String::new();
    for _ in 0..CASES {
        let v = value(&mut rng, 0);
        let ours = v.to_json_string().unwrap();
        lines.push_str(&serde_json::to_string(&serde_json::json!([ours, program(&v)])).unwrap());
        lines.push('\n');
    }
    let path = std::env::temp_dir().join(format!("callpost-corpus-{}.jsonl", std::process::id()));
    std::fs::write(&path, lines).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node_stringify.mjs");
    let out = Command::new("node")
        .arg(script)
        .arg(&path)
        .output()
        .expect("node must be installed to run this test");
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("checked {CASES} mismatched 0"));
}
