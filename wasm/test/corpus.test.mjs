// stringify equals the real JSON.stringify over a random corpus, and request
// bodies are fixed points of JSON.stringify(JSON.parse(body)).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stringify, Webhooks } from 'callpost';

let state = 0x5eedn;
function rnd() {
  // SplitMix64, so every run checks the same corpus.
  state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return Number((z ^ (z >> 31n)) >> 11n) / 2 ** 53;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const PIECES = ['a', 'Zoë', '日本語', '😀', '\u0000', '\u0001', '\b', '\t', '\n', '\f', '\r', '\u001f', '\u007f', '\u2028', '"', '\\', '/', 'é', '\u{10ffff}'];
const KEYS = ['0', '1', '12', '4294967294', '4294967295', '01', '-1', '1.5', '10', 'a1'];
const str = () => Array.from({ length: Math.floor(rnd() * 6) }, () => pick(PIECES)).join('');
function num() {
  const buf = new DataView(new ArrayBuffer(8));
  for (;;) {
    let n;
    switch (Math.floor(rnd() * 7)) {
      case 0: buf.setUint32(0, Math.floor(rnd() * 2 ** 32)); buf.setUint32(4, Math.floor(rnd() * 2 ** 32)); n = buf.getFloat64(0); break;
      case 1: n = -0; break;
      case 2: n = Math.floor((rnd() - 0.5) * 2 ** 53); break;
      case 3: n = 10 ** Math.floor(rnd() * 600 - 300) * Math.ceil(rnd() * 9); break;
      case 4: n = (rnd() - 0.5) * 1e6; break;
      case 5: n = 1 / Math.ceil(rnd() * 1000); break;
      default: n = Math.floor(rnd() * 100);
    }
    if (Number.isFinite(n)) return n;
  }
}
function value(depth = 0) {
  const leaf = depth >= 5 || rnd() < 0.33;
  switch (leaf ? Math.floor(rnd() * 4) : 4 + Math.floor(rnd() * 2)) {
    case 0: return null;
    case 1: return rnd() < 0.5;
    case 2: return num();
    case 3: return str();
    case 4: return Array.from({ length: Math.floor(rnd() * 5) }, () => value(depth + 1));
    default: {
      const o = {};
      for (let i = Math.floor(rnd() * 7); i > 0; i--) o[rnd() < 0.5 ? pick(KEYS) : str()] = value(depth + 1);
      return o;
    }
  }
}

test('stringify equals JSON.stringify on 10,000 random values', () => {
  for (let i = 0; i < 10_000; i++) {
    const v = value();
    assert.equal(stringify(v), JSON.stringify(v));
  }
});

test('request bodies survive JSON.stringify(JSON.parse(body))', () => {
  const hooks = new Webhooks({ endpoints: ['https://example.com/'], sharedSecret: 'k' });
  for (let i = 0; i < 2_000; i++) {
    const call = { type: pick(['track', 'identify', 'page', 'screen', 'group']), userId: 'u' + i, event: 'E' + str(), groupId: 'g',
      properties: value(1), traits: value(1), context: { app: value(2), device: value(2), os: { name: str() } } };
    if (typeof call.properties !== 'object' || call.properties === null || Array.isArray(call.properties)) call.properties = {};
    if (typeof call.traits !== 'object' || call.traits === null || Array.isArray(call.traits)) call.traits = {};
    const { body } = hooks.request(call, 0, 1_795_341_845_123);
    assert.equal(JSON.stringify(JSON.parse(body)), body);
  }
});

test('values JSON.stringify would silently change are refused with codes', () => {
  const cyc = []; cyc.push({ cyc });
  const cases = [
    [{ a: NaN }, 'non_finite_number'], [{ a: [Infinity] }, 'non_finite_number'], [{ a: 10n }, 'not_json'],
    [{ f() {} }, 'not_json'], [{ s: Symbol('x') }, 'not_json'], [[1, undefined], 'not_json'], [undefined, 'not_json'],
    [cyc, 'cyclic_value'], [{ n: 2 ** 53 + 2, big: 9007199254740993n }, 'not_json'], ['\ud800', 'invalid_unicode'],
  ];
  for (const [v, code] of cases) assert.throws(() => stringify(v), (e) => e.code === code, code);
  let deep = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.throws(() => stringify(deep), (e) => e.code === 'too_deep');
  assert.equal(stringify({ a: undefined, b: 1 }), '{"b":1}', 'an undefined property is absent, as in JSON.stringify');
  assert.equal(stringify({ at: new Date(Date.UTC(2026, 10, 22, 10, 4, 5, 123)) }), '{"at":"2026-11-22T10:04:05.123Z"}');
  assert.throws(() => stringify({ a: { b: [0, 1n] } }), (e) => e.code === 'not_json' && e.message.includes('$.a.b[1]') && e instanceof TypeError);
});
