// The JavaScript API over the wasm core. Values cross into wasm as JSON text
// (JSON.stringify runs natively), and the I/O loops here are short: poll the
// core, fetch, report the outcome, sleep until pollTimeout(). Retry, batching
// and failover rules live in the Rust core, shared with the Python package.
//
// makeSigning is sign/verify/Signer alone: the `callpost/verify` entry runs it
// over the verify-only wasm module (the crate's `signing` feature), and
// makeApi builds the rest on it. makeClient is the `callpost/client` entry's
// part of makeApi, over the client-only module (`client`): the classes
// reach for the wasm exports only when used, so the missing ones (webhooks,
// signing) cost nothing there.
//
// webInit is the browsers' `init()` of each entry (web.mjs, client-web.mjs,
// verify-web.mjs).
//
// This file must stay free of imports: the build derives a CommonJS copy
// from it by dropping `export` from its four functions.

export function makeSigning(wasm, platform) {
  // node:crypto hashes large bodies faster than wasm's software SHA-1
  // (SHA-NI). Where the two cross moves with the machine's state, so the
  // threshold sits below the worse crossover and sign() is never slower than
  // the platform. Session 6 put sign()'s at 1280 B, under the cost of key
  // setup in wasm; since the core caches the last key's state (session 7),
  // sign() with the last call's secret costs what the prekeyed Signer
  // does, whose crossover is about 2 KB: wasm against node 0.84-0.93 at
  // 1792 B, 0.89-0.98 at 2048 B, 0.94-1.06 at 2112 B in session 10's three
  // sweeps. With two secrets alternating (key setup on every call) it was
  // still 0.92-0.97 at 1791 B (BENCHMARKS.md).
  const NATIVE_HMAC_FROM = 1792;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { fatal: true });

  function error(name, code, message) {
    const err = name === 'NotJSONError' || name === 'TypeError' ? new TypeError(message) : new Error(message);
    err.name = name;
    err.code = code;
    return err;
  }

  const notBytes = (what) => error('TypeError', 'invalid_argument', `${what} must be a string or Uint8Array`);

  // sign and verify write the body and secret straight into the core's
  // scratch buffer in wasm memory, and read the 40 hex digits back from it:
  // handing them over as values (wasm-bindgen's type checks, copies and
  // mallocs) cost half of a 423 B sign. The views are renewed when the
  // buffer moves or the memory grows (which detaches the old ones).
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
    if (platform.hmacSha1 && body.length >= NATIVE_HMAC_FROM && secret.length > 0) {
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
      if (typeof body !== 'string') throw error('TypeError', 'invalid_argument', 'body must be a string');
      return this.#sign(body);
    }

    signBytes(body) {
      if (!(body instanceof Uint8Array)) throw error('TypeError', 'invalid_argument', 'body must be a Uint8Array');
      return this.#sign(body);
    }

    free() {
      this.#core.free();
    }
  }

  function verifyRequest(body, headers, secrets) {
    let signature = null;
    if (headers && typeof headers.get === 'function') signature = headers.get('x-signature');
    else for (const [k, v] of Object.entries(headers || {})) if (k.toLowerCase() === 'x-signature') signature = v;
    if (signature == null) return false;
    return verify(body, Array.isArray(signature) ? signature[0] : signature, secrets);
  }

  const api = { sign, verify, verifyRequest, Signer, init: async () => api };
  return {
    api,
    error, notBytes, isBytes, room, scratchOf, put, decoder, NATIVE_HMAC_FROM,
  };
}

export function makeApi(wasm, platform) {
  const signing = makeSigning(wasm, platform);
  const { sign, verify, verifyRequest, Signer } = signing.api;
  const { error, notBytes, isBytes, room, scratchOf, put, decoder, NATIVE_HMAC_FROM } = signing;

  // JSON text for a JS value, refusing what JSON.stringify would silently
  // change: NaN/Infinity (→ null), BigInt, functions and symbols (dropped or
  // thrown), undefined in arrays (→ null). An undefined object property is
  // left out, as JSON.stringify does: it is JavaScript's "absent".
  // True when JSON.stringify(v) keeps every value as it is: the fast path,
  // a plain walk with no replacer (a replacer makes JSON.stringify several
  // times slower). Anything else takes the replacer path below, which finds
  // the offending value and names its path.
  function isPlain(v, depth) {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return true;
      case 'number':
        return Number.isFinite(v);
      case 'object': {
        if (v === null) return true;
        // Cycles end here too, and the replacer path then reports them.
        if (depth >= 64 || typeof v.toJSON === 'function') return false;
        if (Array.isArray(v)) {
          for (let i = 0; i < v.length; i++) {
            if (v[i] === undefined || !isPlain(v[i], depth + 1)) return false;
          }
          return true;
        }
        for (const k in v) {
          if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
          const x = v[k];
          if (x !== undefined && !isPlain(x, depth + 1)) return false;
        }
        return true;
      }
      default:
        return false;
    }
  }

  function toJson(value) {
    if (isPlain(value, 0)) return JSON.stringify(value);
    if (value === undefined) throw error('NotJSONError', 'not_json', 'value at $ is not JSON: undefined');
    const paths = new Map();
    let root = true;
    function replacer(key, v) {
      const base = root ? '$' : paths.get(this) ?? '$';
      const path = root ? '$' : Array.isArray(this) ? `${base}[${key}]` : `${base}.${key}`;
      root = false;
      switch (typeof v) {
        case 'number':
          if (!Number.isFinite(v)) throw error('JSONValueError', 'non_finite_number', `number at ${path} is NaN or infinite, which JSON cannot represent`);
          return v;
        case 'bigint':
        case 'function':
        case 'symbol':
          throw error('NotJSONError', 'not_json', `value at ${path} is not JSON: ${typeof v}`);
        case 'undefined':
          if (Array.isArray(this)) throw error('NotJSONError', 'not_json', `value at ${path} is not JSON: undefined`);
          return v;
        case 'object':
          if (v !== null) paths.set(v, path);
          return v;
        default:
          return v;
      }
    }
    try {
      return JSON.stringify(value, replacer);
    } catch (e) {
      if (e && e.code) throw e;
      if (e instanceof RangeError) throw error('JSONValueError', 'too_deep', 'value nests deeper than 64 levels');
      if (e instanceof TypeError && /circular|cyclic/i.test(e.message)) throw error('NotJSONError', 'cyclic_value', 'value contains itself');
      throw e;
    }
  }

  function textOf(v, what) {
    if (typeof v === 'string') return v;
    if (v instanceof Uint8Array) {
      try {
        return decoder.decode(v);
      } catch {
        // The core's code for the same input (it reads bytes as UTF-8 too).
        throw error('JSONValueError', 'invalid_unicode', `${what} bytes are not valid UTF-8`);
      }
    }
    throw notBytes(what);
  }

  // A call for the core: its UTF-8 JSON written at the start of the wasm
  // scratch buffer (see sign()), passed as the byte count. The core checks
  // the UTF-8.
  function callJson(call) {
    const json = isBytes(call) ? call : toJson(call);
    return put(json, scratchOf(room(json)));
  }

  function randomBytes(n) {
    return globalThis.crypto.getRandomValues(new Uint8Array(n));
  }

  function seed() {
    const b = randomBytes(8);
    return new DataView(b.buffer).getUint32(0) * 2 ** 21 + (new DataView(b.buffer).getUint32(4) >>> 11);
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

  function stringify(value) {
    return wasm.canonicalize(toJson(value));
  }

  function verifyParsed(value, signature, secrets) {
    return wasm.verifyJson(toJson(value), signature, secrets);
  }

  // Maps a fetch failure to the core's outcome kinds.
  function failureKind(e) {
    if (e && (e.name === 'TimeoutError' || e.name === 'AbortError')) return ['timeout', e.name];
    const cause = e && e.cause;
    const code = (cause && (cause.code || (cause.cause && cause.cause.code))) || '';
    if (/CERT|SSL|TLS|SELF_SIGNED|ALTNAME|UNABLE_TO_VERIFY/i.test(code)) return ['tls', `${code}: ${cause.message || ''}`];
    return ['connection', `${code || (e && e.name)}: ${(cause && cause.message) || (e && e.message) || ''}`];
  }

  async function send(fetchFn, request, deadlineMs, extra) {
    try {
      const r = await fetchFn(request.url, {
        method: request.method,
        headers: request.headers,
        body: request.body,
        // Redirects are a rejection (see the README); never follow one.
        redirect: 'manual',
        signal: AbortSignal.timeout(Math.max(1, deadlineMs - Date.now())),
        ...extra,
      });
      await r.arrayBuffer().catch(() => undefined);
      // A browser's manual redirect is an opaque response with status 0.
      const status = r.type === 'opaqueredirect' ? 302 : r.status;
      return [status, r.headers.get('retry-after') ?? undefined, undefined, undefined];
    } catch (e) {
      const [kind, message] = failureKind(e);
      return [undefined, undefined, kind, message];
    }
  }

  function finish(d, outcome) {
    const log = d.log;
    if (outcome.kind === 'delivered') return { delivered: true, endpoint: outcome.endpoint, attempts: outcome.attempt, log };
    if (outcome.kind === 'disabled') return { delivered: false, endpoint: null, attempts: 0, log };
    const err = error('DeliveryError', outcome.reason, `delivery gave up after ${outcome.attempts} attempts (${outcome.reason})`);
    err.outcome = outcome;
    err.log = log;
    throw err;
  }

  class Webhooks {
    constructor({ endpoints, sharedSecret, timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs } = {}) {
      const secret = sharedSecret == null ? null : textOf(sharedSecret, 'sharedSecret');
      this._core = new wasm.WebhooksCore(toJson({ endpoints, sharedSecret: secret }));
      // Large request bodies are signed by the platform too (see sign()); the
      // core still decides which header carries the signature, and when.
      if (platform.hmacSha1 && secret) this._core.setNativeHmac((bytes) => platform.hmacSha1(secret, bytes), NATIVE_HMAC_FROM);
      this._timing = { timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs };
    }

    get urls() {
      return this._core.urls;
    }

    /** The validated settings, for `delivery.pollRequest(nowMs, hooks.settings)`. */
    get settings() {
      return this._core;
    }

    request(call, endpoint = 0, nowMs = Date.now()) {
      // One crossing, one string: building the object property by property
      // from wasm costs more than the core's whole job.
      const len = this._core.requestScratch(callJson(call), endpoint, nowMs);
      // "<n>\n<url>\n<name>\n<value>…\n<body>" (see requestScratch).
      const s = decoder.decode(scratchOf(len).subarray(0, len));
      let end = s.indexOf('\n');
      const n = +s.slice(0, end);
      let at = end + 1;
      end = s.indexOf('\n', at);
      const url = s.slice(at, end);
      const headers = [];
      for (let i = 0; i < n; i++) {
        const mid = s.indexOf('\n', end + 1);
        at = s.indexOf('\n', mid + 1);
        headers.push([s.slice(end + 1, mid), s.slice(mid + 1, at)]);
        end = at;
      }
      return { method: 'POST', url, headers, body: s.slice(end + 1) };
    }

    isEnabledFor(call) {
      return this._core.isEnabledFor(callJson(call));
    }

    delivery(call, { nowMs = Date.now(), seed: s = seed() } = {}) {
      return new wasm.DeliveryCore(this._core, callJson(call), nowMs, { ...this._timing, seed: s });
    }

    async deliver(call, { fetch: fetchFn = globalThis.fetch } = {}) {
      const d = this.delivery(call);
      try {
        for (;;) {
          const a = d.pollRequest(Date.now(), this._core);
          if (a) {
            const [status, retryAfter, kind, message] = await send(fetchFn, a.request, a.deadlineMs);
            d.handleResponse(Date.now(), status, retryAfter, kind, message);
            continue;
          }
          const outcome = d.pollOutcome();
          if (outcome) return finish(d, outcome);
          await sleep(d.pollTimeout() - Date.now());
          d.handleTimeout(Date.now());
        }
      } finally {
        d.free();
      }
    }
  }

  const KEEPALIVE_LIMIT = 64 * 1024; // fetch keepalive's in-flight body budget

  class Client {
    constructor({ writeKey, endpoint, flushAt, flushAfter, maxQueue, maxAttempts, maxRetryMs, timeoutMs,
                  backoffBaseMs, backoffCapMs, onError, fetch: fetchFn } = {}) {
      this._core = new wasm.BatcherCore({ writeKey, endpoint, flushAt, flushAfterMs: flushAfter, maxQueue, maxAttempts,
        maxRetryMs, requestTimeoutMs: timeoutMs, backoffBaseMs, backoffCapMs, seed: seed() }, Date.now());
      this.onError = onError;
      this._fetch = fetchFn || ((...args) => globalThis.fetch(...args));
      this._pumping = false;
      this._timer = null;
      this._waiters = [];
      this._closed = false;
      if (platform.onExit) platform.onExit(this);
      if (typeof globalThis.addEventListener === 'function' && typeof document !== 'undefined') {
        globalThis.addEventListener('pagehide', () => this._pagehide());
      }
    }

    identify(fields) { return this._enqueue('identify', fields); }
    track(fields) { return this._enqueue('track', fields); }
    page(fields) { return this._enqueue('page', fields); }
    screen(fields) { return this._enqueue('screen', fields); }
    group(fields) { return this._enqueue('group', fields); }
    alias(fields) { return this._enqueue('alias', fields); }

    _enqueue(type, fields) {
      const id = this._core.handleCall(Date.now(), callJson(toJson({ type, ...fields })), randomBytes(16));
      this._kick();
      return id;
    }

    _report(ev) {
      if (ev.kind !== 'failed') return;
      const err = error('DeliveryError', ev.code, ev.reason);
      const messages = ev.messages.map((m) => JSON.parse(m.json));
      if (this.onError) {
        try {
          this.onError(err, messages);
        } catch (e) {
          console.error('callpost: onError threw', e);
        }
      } else {
        console.error(`callpost: ${messages.length} messages failed: ${ev.reason}`);
      }
    }

    _drainEvents() {
      for (let ev = this._core.pollEvent(); ev; ev = this._core.pollEvent()) this._report(ev);
    }

    _kick() {
      if (this._pumping) return;
      if (this._timer) clearTimeout(this._timer);
      this._timer = null;
      this._pumping = true;
      queueMicrotask(() => this._pump());
    }

    async _pump() {
      try {
        for (;;) {
          const now = Date.now();
          this._core.handleTimeout(now);
          this._drainEvents();
          const b = this._core.pollRequest(now);
          if (!b) break;
          const [status, retryAfter, kind, message] = await send(this._fetch, b.request, b.deadlineMs);
          this._core.handleResponse(Date.now(), b.batchId, status, retryAfter, kind, message);
        }
      } finally {
        this._pumping = false;
      }
      this._drainEvents();
      if (this._core.idle) {
        for (const w of this._waiters.splice(0)) w();
      }
      const t = this._core.pollTimeout();
      if (t !== undefined && !this._closed) {
        this._timer = setTimeout(() => this._kick(), Math.max(0, t - Date.now()));
        // A pending flush timer must not keep Node alive; exit hooks flush.
        if (this._timer && typeof this._timer.unref === 'function') this._timer.unref();
      }
    }

    /** Sends everything queued now; settles when all of it is delivered or reported. */
    flush() {
      this._core.flush(Date.now());
      const done = new Promise((resolve) => {
        if (this._core.idle) resolve();
        else this._waiters.push(resolve);
      });
      this._kick();
      return done;
    }

    /** Flushes (up to timeoutMs), then reports whatever is left to onError. */
    async close({ timeoutMs = 10_000 } = {}) {
      if (this._closed) return;
      let timer;
      await Promise.race([this.flush(), new Promise((r) => { timer = setTimeout(r, timeoutMs); })]);
      clearTimeout(timer);
      this._closed = true;
      if (this._timer) clearTimeout(this._timer);
      this._core.shutdown();
      this._drainEvents();
    }

    // The page is going away: send what is queued with keepalive fetches,
    // which outlive the page (sendBeacon cannot carry Authorization).
    _pagehide() {
      const now = Date.now();
      this._core.flush(now);
      for (let b = this._core.pollRequest(now); b; b = this._core.pollRequest(now)) {
        const keepalive = b.request.body.length <= KEEPALIVE_LIMIT;
        send(this._fetch, b.request, b.deadlineMs, { keepalive }).then(([status, retryAfter, kind, message]) => {
          this._core.handleResponse(Date.now(), b.batchId, status, retryAfter, kind, message);
          this._drainEvents();
        });
      }
    }
  }

  async function init() {
    return api;
  }

  const api = {
    stringify, sign, verify, verifyParsed, verifyRequest, traitName: wasm.traitName, parseTimestamp: wasm.parseTimestamp,
    Webhooks, Client, Signer, Delivery: wasm.DeliveryCore, Batcher: wasm.BatcherCore,
    USER_AGENT: 'callpost/1.0', MAX_MESSAGE_BYTES: wasm.maxMessageBytes(), init,
  };
  return api;
}

export function makeClient(wasm, platform) {
  const { Client, Batcher, stringify, parseTimestamp, USER_AGENT, MAX_MESSAGE_BYTES } = makeApi(wasm, platform);
  const api = { Client, Batcher, stringify, parseTimestamp, USER_AGENT, MAX_MESSAGE_BYTES, init: async () => api };
  return api;
}

// An entry's `init(input)` for browsers, bundlers and edge runtimes: loads
// its wasm module once (`input`: a URL, a WebAssembly.Module or the bytes,
// else the module beside the glue), then builds the API with `make`.
export function webInit(initWasm, wasm, make) {
  let api;
  return async function init(input) {
    if (!api) {
      await initWasm(input === undefined ? undefined : { module_or_path: input });
      api = make(wasm, {});
    }
    return api;
  };
}
