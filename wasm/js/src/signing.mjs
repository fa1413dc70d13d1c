// Signing: sign, verify, verifyRequest and the prekeyed Signer, over the
// core's HMAC-SHA1 and a scratch buffer in wasm memory. makeSigning is the
// `callpost/verify` entry's API (this and receive.mjs), over the
// verify-only wasm module (the crate's `signing` feature); makeApi builds
// the full API on it.
import { makeError } from './errors.mjs';
import { makeReceiving } from './receive.mjs';
import { makeStandard } from './standard.mjs';

// `platform.hmacSha1(secret, body)`, when given (Node), signs bodies from
// the core's NATIVE_HMAC_FROM bytes up. Returns {api} and, for the
// Webhooks of the full API, the scratch buffer's way across.
export function makeSigning(wasm, platform) {
  // node:crypto hashes large bodies faster than wasm's software SHA-1
  // (SHA-NI); the core sets the size from which it does (BENCHMARKS.md).
  const NATIVE_HMAC_FROM = wasm.hostHmacMinBytes();
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { fatal: true });

  const error = makeError(wasm);
  const notBytes = (what) => error('invalid_argument', `${what} must be a string or Uint8Array`);

  // sign and verify write the body and secret straight into the core's
  // scratch buffer in wasm memory, and read the 40 hex digits back from it:
  // handing them over as values (wasm-bindgen's type checks, copies and
  // mallocs) cost half of a 423 B sign. The views are renewed when the
  // buffer moves or the memory grows (which detaches the old ones). The
  // buffer is private to this module and to Webhooks.request (webhooks.mjs).
  const memory = wasm.wasmMemory();
  let heap = null;
  let at = -1;
  let scratchView = null;
  let hexView = null;
  const isBytes = (v) => typeof v === 'string' || v instanceof Uint8Array;
  const room = (v) => (typeof v === 'string' ? v.length * 3 : v.length);

  // The scratch buffer, at least `len` bytes, as a view from its start.
  function scratchOf(len) {
    const p = wasm.scratch(len);
    if (p !== at || heap.buffer !== memory.buffer || scratchView.length < len) {
      heap = new Uint8Array(memory.buffer);
      at = p;
      scratchView = heap.subarray(p, p + Math.max(len, 40));
      hexView = heap.subarray(p, p + 40);
      bodyView = null;
    }
    return scratchView;
  }

  // Writes `v` (a string as UTF-8, or bytes) at `view`'s start.
  function put(v, view) {
    if (typeof v === 'string') return encoder.encodeInto(v, view).written;
    view.set(v);
    return v.length;
  }

  // The key (if any) at the scratch buffer's start, then the body at
  // `bodyAt`, the key's room. For one secret `bodyAt` is the same on every
  // call, so the body's view is kept: making one per call (`subarray`) was
  // about 100 ns of a 1.5 us sign of 423 B. Returns the body's byte count;
  // `keyLen` and `bodyAt` say the rest (read them after the call), and the
  // core checks all three against the buffer.
  let bodyView = null;
  let bodyAt = 0;
  let keyLen = 0;
  function toScratch(body, key) {
    const kRoom = key === null ? 0 : room(key);
    const view = scratchOf(kRoom + room(body));
    if (bodyView === null || bodyAt !== kRoom) {
      bodyAt = kRoom;
      bodyView = view.subarray(kRoom);
    }
    keyLen = key === null ? 0 : put(key, view);
    return put(body, bodyView);
  }

  // Bytes for the value path (verify against several secrets): wasm-bindgen
  // would copy a string into wasm memory one UTF-16 unit at a time in JS.
  const bytesOf = (v) => (typeof v === 'string' ? encoder.encode(v) : v);

  function sign(secret, body) {
    // Empty secrets go to the core, which refuses them with empty_secret.
    if (platform.hmacSha1 && isBytes(body) && body.length >= NATIVE_HMAC_FROM && isBytes(secret) && secret.length > 0) {
      return platform.hmacSha1(secret, body);
    }
    if (!isBytes(secret)) throw notBytes('secret');
    if (!isBytes(body)) throw notBytes('body');
    const b = toScratch(body, secret);
    wasm.signScratch(keyLen, bodyAt, b);
    return decoder.decode(hexView);
  }

  function verify(body, signature, secrets) {
    // Large bodies: node:crypto computes each secret's HMAC (as in sign()),
    // and the core checks the signature and compares in constant time.
    // Anything unusual (no secrets, an empty or non-bytes one) takes the
    // core's own path below, which reports it.
    if (platform.hmacSha1 && isBytes(body) && body.length >= NATIVE_HMAC_FROM && typeof signature === 'string') {
      const usable = (s) => isBytes(s) && s.length > 0;
      let digests = null;
      if (usable(secrets)) digests = platform.hmacSha1(secrets, body);
      else if (Array.isArray(secrets) && secrets.length > 0 && secrets.every(usable)) {
        digests = secrets.map((s) => platform.hmacSha1(s, body)).join('');
      }
      let ok;
      if (digests !== null) {
        const d = toScratch(digests, signature);
        ok = wasm.verifyDigestsScratch(keyLen, bodyAt, d);
      }
      if (ok !== undefined) return ok;
    }
    if (isBytes(secrets) && isBytes(body) && typeof signature === 'string') {
      const b = toScratch(body, secrets);
      return wasm.verifyScratch(keyLen, bodyAt, b, signature);
    }
    if (typeof signature !== 'string') throw error('invalid_argument', 'signature must be a string');
    return wasm.verify(bytesOf(body), signature, secrets);
  }

  // The prekeyed signer. Node's HMAC takes bodies from NATIVE_HMAC_FROM
  // up; the closure keeps the secret out of the object's fields.
  class Signer {
    #core;
    #native = null;
    constructor(secret) {
      this.#core = new wasm.Signer(secret);
      if (platform.hmacSha1) this.#native = (body) => platform.hmacSha1(secret, body);
    }

    #sign(body) {
      if (this.#native !== null && body.length >= NATIVE_HMAC_FROM) return this.#native(body);
      this.#core.signScratch(toScratch(body, null));
      return decoder.decode(hexView);
    }

    signString(body) {
      if (typeof body !== 'string') throw error('invalid_argument', 'body must be a string');
      return this.#sign(body);
    }

    signBytes(body) {
      if (!(body instanceof Uint8Array)) throw error('invalid_argument', 'body must be a Uint8Array');
      return this.#sign(body);
    }

    free() {
      this.#core.free();
    }
  }

  // A request's headers as two lists, names and values: a Headers object,
  // or a plain map whose values may be arrays (Node's IncomingHttpHeaders).
  function headerLists(headers) {
    const names = [];
    const values = [];
    // One per line crosses into wasm: a newline (which no HTTP header can
    // hold) becomes a space.
    const add = (k, v) => {
      if (v == null) return;
      names.push(String(k).replace(/\n/g, ' '));
      values.push(String(Array.isArray(v) ? v[0] : v).replace(/\n/g, ' '));
    };
    if (headers && typeof headers.forEach === 'function' && typeof headers.get === 'function') {
      headers.forEach((v, k) => add(k, v));
    } else if (headers && typeof headers === 'object') {
      for (const [k, v] of Object.entries(headers)) add(k, v);
    } else {
      throw error('invalid_argument', 'headers must be a Headers object or a plain object');
    }
    return [names, values];
  }

  function verifyRequest(body, headers, secrets) {
    const [names, values] = headerLists(headers);
    const at = wasm.signatureHeaderIndex(names.join('\n'));
    if (at === undefined) return false;
    return verify(body, values[at], secrets);
  }

  const { signStandard, verifyStandard, STANDARD_TOLERANCE_MS, toleranceOf } = makeStandard(wasm, { error, headerLists });
  const { verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal } =
    makeReceiving(wasm, { error, encoder, decoder, verify, headerLists, toleranceOf });
  const api = {
    sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
    signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
    init: async () => api,
  };
  return {
    api,
    // Webhooks.request's way across (webhooks.mjs).
    toScratch, scratchOf,
    // The `len` bytes from address `p` of wasm memory, as a view (valid
    // until the memory next grows).
    bytesAt: (p, len) => new Uint8Array(memory.buffer, p, len),
  };
}
