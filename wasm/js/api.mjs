// The JavaScript API over the wasm core: the package's public surface. The
// wasm exports are its private half. Values cross into wasm as JSON text or
// UTF-8 bytes (JSON.stringify runs natively). The I/O loops are written once,
// as generators that poll the core and say what to do (deliverySteps,
// senderSteps), and run by one executor (run): a round's requests go out
// together with Promise.all over fetch. Retry, batching and round rules,
// limits and defaults live in the Rust core, shared with the Python package.
//
// makeSigning is sign/verify/verifyRequest/Signer alone: the `callpost/verify`
// entry runs it over the verify-only wasm module (the crate's `signing`
// feature), and makeApi builds the rest on it. makeClient is the
// `callpost/client` entry's part of makeApi, over the client-only module
// (`client`): the classes reach for the wasm exports only when used, so the
// missing ones (webhooks, signing) cost nothing there. makeSegment is the
// `callpost/segment` entry: analytics-node's Analytics on makeClient's
// Client, over the same module.
//
// webInit is the browsers' `init()` of each entry (web.mjs, client-web.mjs,
// verify-web.mjs, segment-web.mjs); staticInit starts the Workers and edge
// entries (*workerd.mjs), which import their .wasm statically.
//
// This file must stay free of imports: the build derives a CommonJS copy
// from it by dropping `export` from its six functions.

// A JS error for `code`, named and typed as the core's registry says.
function errorOf(wasm, code, message) {
  const [name, isTypeError] = wasm.errorClass(code) ?? ['CallpostError', false];
  const err = isTypeError ? new TypeError(message) : new Error(message);
  err.name = name;
  err.code = code;
  return err;
}

export function makeSigning(wasm, platform) {
  // node:crypto hashes large bodies faster than wasm's software SHA-1
  // (SHA-NI); the core sets the size from which it does (BENCHMARKS.md).
  const NATIVE_HMAC_FROM = wasm.hostHmacMinBytes();
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { fatal: true });

  const error = (code, message) => errorOf(wasm, code, message);

  const notBytes = (what) => error('invalid_argument', `${what} must be a string or Uint8Array`);

  // sign and verify write the body and secret straight into the core's
  // scratch buffer in wasm memory, and read the 40 hex digits back from it:
  // handing them over as values (wasm-bindgen's type checks, copies and
  // mallocs) cost half of a 423 B sign. The views are renewed when the
  // buffer moves or the memory grows (which detaches the old ones). The
  // buffer is private to this file.
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

  // -- Receiving: receive(), Receiver, SeenIds, and the framework glue
  // (webhookHandler for web-standard Request/Response, nodeMiddleware for
  // Node's req/res). Which header, which bytes it covers, the ids, the
  // HTTP statuses and the LRU's size are the core's (receive.rs).

  // The raw body as bytes or text; what a framework already parsed is
  // refused with the fix.
  function rawBody(body) {
    if (typeof body === 'string' || body instanceof Uint8Array) return body;
    if (body instanceof ArrayBuffer) return new Uint8Array(body);
    if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    if (body !== null && typeof body === 'object') {
      throw error('invalid_argument', 'body must be the raw request body (string, Uint8Array, ArrayBuffer or Buffer) '
        + 'exactly as received, not a parsed object: re-serializing changes the bytes the signature covers. '
        + 'Read the raw body (await request.text(), express.raw(), Fastify\'s parseAs: "buffer"), '
        + 'or verify a parsed body with verifyParsed(value, signature, secrets)');
    }
    throw error('invalid_argument', 'body must be a string, Uint8Array, ArrayBuffer or Buffer');
  }

  // [value, header, coverage, ids]: the core verifies, JSON.parse builds
  // the value (the core has checked the body is JSON).
  function check(body, headers, secrets, options) {
    const raw = rawBody(body);
    const [names, values] = headerLists(headers);
    const allow = Boolean(options && options.allowFirstEventSignature);
    const [header, coverage, ids] = wasm.receive(raw, names.join('\n'), values.join('\n'), secrets, allow);
    const value = JSON.parse(typeof raw === 'string' ? raw : decoder.decode(raw));
    return [value, header, coverage, ids];
  }

  function receive(body, headers, secrets, options) {
    return check(body, headers, secrets, options)[0];
  }

  // Verifies a body a framework has already parsed, by re-stringifying it
  // as the sender did (JSON.stringify): the spec's own recipe. Prefer
  // receive() over the raw body.
  function verifyParsed(value, signature, secrets) {
    return verify(JSON.stringify(value), signature, secrets);
  }

  // The default `seen` hook: the last `capacity` ids, in memory.
  class SeenIds {
    #ids = new Set();
    constructor(capacity = wasm.seenCapacity()) {
      if (!Number.isInteger(capacity) || capacity < 1) throw error('invalid_argument', 'capacity must be a positive integer');
      this.capacity = capacity;
    }

    // True when seen before; otherwise remembered (check-and-set).
    seen(id) {
      if (this.#ids.has(id)) {
        this.#ids.delete(id);
        this.#ids.add(id);
        return true;
      }
      this.#ids.add(id);
      if (this.#ids.size > this.capacity) this.#ids.delete(this.#ids.values().next().value);
      return false;
    }

    forget(id) {
      this.#ids.delete(id);
    }

    get size() {
      return this.#ids.size;
    }
  }

  // A `seen` option as {seen(id), forget?(id)}: a SeenIds, a function, an
  // object with those methods, or false (no filter).
  function seenHook(seen) {
    if (seen === false) return null;
    if (seen === undefined || seen === null) return new SeenIds();
    if (typeof seen === 'function') return { seen: (id) => seen(id) };
    if (typeof seen.seen === 'function') return seen;
    throw error('invalid_argument', 'seen must be a function (id) => boolean, an object with seen(id), or false');
  }

  class Receiver {
    #secrets;
    #seen;
    constructor(secrets, options = {}) {
      if (secrets === undefined || secrets === null) throw error('invalid_argument', 'secrets are required');
      this.#secrets = secrets;
      this.#seen = seenHook(options.seen);
      this.allowFirstEventSignature = Boolean(options.allowFirstEventSignature);
    }

    // The verified webhook: its new calls (and their ids), the duplicates'
    // ids, the parsed body, the header and what it covers.
    async receive(body, headers) {
      const [value, header, coverage, allIds] = check(body, headers, this.#secrets, this);
      const all = Array.isArray(value) ? value : [value];
      const calls = [];
      const ids = [];
      const duplicates = [];
      for (let i = 0; i < all.length; i++) {
        const id = allIds[i];
        if (id !== null && this.#seen !== null && (await this.#seen.seen(id))) {
          duplicates.push(id);
          continue;
        }
        calls.push(all[i]);
        ids.push(id);
      }
      return {
        body: value, calls, ids, duplicates, batch: Array.isArray(value), header, coverage,
        onlyDuplicates: calls.length === 0 && duplicates.length > 0,
        call: !Array.isArray(value) && calls.length === 1 ? calls[0] : null,
      };
    }

    // The handler failed: forget the new ids so the sender's retry is
    // processed (where the hook can forget).
    async failed(webhook) {
      if (this.#seen === null || typeof this.#seen.forget !== 'function') return;
      for (const id of webhook.ids) if (id !== null) await this.#seen.forget(id);
    }
  }

  const receiverOf = (r) => (r instanceof Receiver ? r : new Receiver(r.secrets, r));
  // The answer to a refused webhook, {status, body}: 401 for a signature
  // that did not verify, 400 otherwise (the core's rule). An error that is
  // not callpost's is rethrown.
  function refusal(e) {
    if (!e || typeof e.code !== 'string' || wasm.errorClass(e.code) === undefined) throw e;
    return { status: wasm.refusalStatus(e.code), body: { error: e.code, message: e.message } };
  }

  // The webhook to hand to the handler ({hook}), or the answer to send
  // instead ({status, body}): a refusal, or 200 when every call was seen.
  async function triage(r, body, headers) {
    let hook;
    try {
      hook = await r.receive(body, headers);
    } catch (e) {
      return refusal(e);
    }
    return hook.onlyDuplicates ? { status: 200, body: { duplicates: hook.duplicates.length } } : { hook };
  }

  // (Request) => Promise<Response>, for Workers, Deno, Bun, Next.js route
  // handlers and Hono: verifies, answers refusals (401/400) and
  // all-duplicate bodies (200) itself, otherwise calls
  // handler(webhook, request), whose Response (default 204) is answered.
  function webhookHandler(receiver, handler) {
    const r = receiverOf(receiver);
    return async function handle(request) {
      const { hook, status, body } = await triage(r, new Uint8Array(await request.arrayBuffer()), request.headers);
      if (!hook) return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
      try {
        const out = await handler(hook, request);
        return out instanceof Response ? out : new Response(null, { status: 204 });
      } catch (e) {
        await r.failed(hook);
        throw e;
      }
    };
  }

  // Node middleware (req, res, next) for Express and plain http: reads the
  // raw body (or takes req.body when express.raw() or another raw-body
  // parser already read it), sets req.webhook and calls next(); answers
  // refusals and all-duplicate bodies itself. A response that does not
  // finish with a status under 400 forgets the new ids.
  function nodeMiddleware(receiver) {
    const r = receiverOf(receiver);
    const readAll = (req) => new Promise((resolve, reject) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(typeof c === 'string' ? encoder.encode(c) : c));
      req.on('end', () => {
        const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) { out.set(c, at); at += c.length; }
        resolve(out);
      });
      req.on('error', reject);
    });
    return async function callpostWebhook(req, res, next) {
      const done = typeof next === 'function' ? next : () => {};
      let outcome;
      try {
        // A raw body a parser already read is used; a parsed one is passed
        // on so that receive() refuses it, naming the fix.
        const b = req.body;
        const raw = typeof b === 'string' || b instanceof Uint8Array;
        const parsed = !raw && b !== null && typeof b === 'object' && Object.keys(b).length > 0;
        outcome = await triage(r, raw || parsed ? b : await readAll(req), req.headers);
      } catch (e) {
        done(e);
        return;
      }
      const { hook, status, body } = outcome;
      if (!hook) {
        res.statusCode = status;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(body));
        return;
      }
      req.webhook = hook;
      let settled = false;
      const settle = (ok) => {
        if (settled) return;
        settled = true;
        if (!ok) r.failed(hook);
      };
      // 'finish' comes before 'close' when the response was sent.
      res.on('finish', () => settle(res.statusCode < 400));
      res.on('close', () => settle(false));
      done();
    };
  }

  const api = {
    sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
    init: async () => api,
  };
  return {
    api,
    error, notBytes, isBytes, decoder, encoder, NATIVE_HMAC_FROM,
    // Webhooks.request's way across, private to this file.
    toScratch, scratchOf,
    // The `len` bytes from address `p` of wasm memory, as a view (valid
    // until the memory next grows).
    bytesAt: (p, len) => new Uint8Array(memory.buffer, p, len),
  };
}

export function makeApi(wasm, platform) {
  const signing = wasm.hostHmacMinBytes ? makeSigning(wasm, platform) : null;
  const { sign, verify, verifyRequest, Signer, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal } = signing ? signing.api : {};
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const DEFAULTS = Object.freeze(JSON.parse(wasm.defaults()));

  const error = (code, message) => errorOf(wasm, code, message);

  // JSON text for a JS value, refusing what JSON.stringify would silently
  // change: NaN/Infinity (→ null), BigInt, functions and symbols (dropped or
  // thrown), undefined in arrays (→ null). An undefined object property is
  // left out, as JSON.stringify does: it is JavaScript's "absent".
  // isPlain is true when JSON.stringify(v) keeps every value as it is: the
  // fast path, a plain walk with no replacer (a replacer makes
  // JSON.stringify several times slower). Anything else takes the replacer
  // path below, which finds the offending value and names its path.
  const MAX_DEPTH = DEFAULTS.maxDepth;
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
        if (depth >= MAX_DEPTH || typeof v.toJSON === 'function') return false;
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
    if (value === undefined) throw error('not_json', 'value at $ is not JSON: undefined');
    const paths = new Map();
    let root = true;
    function replacer(key, v) {
      const base = root ? '$' : paths.get(this) ?? '$';
      const path = root ? '$' : Array.isArray(this) ? `${base}[${key}]` : `${base}.${key}`;
      root = false;
      switch (typeof v) {
        case 'number':
          if (!Number.isFinite(v)) throw error('non_finite_number', `number at ${path} is NaN or infinite, which JSON cannot represent`);
          return v;
        case 'bigint':
        case 'function':
        case 'symbol':
          throw error('not_json', `value at ${path} is not JSON: ${typeof v}`);
        case 'undefined':
          if (Array.isArray(this)) throw error('not_json', `value at ${path} is not JSON: undefined`);
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
      if (e instanceof RangeError) throw error('too_deep', `value nests deeper than ${MAX_DEPTH} levels`);
      if (e instanceof TypeError && /circular|cyclic/i.test(e.message)) throw error('cyclic_value', 'value contains itself');
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
        throw error('invalid_unicode', `${what} bytes are not valid UTF-8`);
      }
    }
    throw error('invalid_argument', `${what} must be a string or Uint8Array`);
  }

  // A call object's JSON text. A number or bigint in an id field is first
  // the core's id string (wasm.idString): the JSON text would lose a
  // bigint (it has no JSON form) and an unsafe integer's digits
  // (JSON.stringify writes the nearest double's). The caller's object is
  // left as it is.
  const ID_FIELDS = wasm.idFields();
  function callJson(call) {
    let out = call;
    if (call !== null && typeof call === 'object') {
      for (const k of ID_FIELDS) {
        const v = call[k];
        if (typeof v !== 'number' && typeof v !== 'bigint') continue;
        if (out === call) out = { ...call };
        out[k] = wasm.idString(k, v);
      }
    }
    return toJson(out);
  }

  // A call's JSON text, as the caller gave it (string or bytes) or from a
  // JS value.
  function callText(call) {
    if (call instanceof Uint8Array || typeof call === 'string') return call;
    return callJson(call);
  }

  // A call for the core: its UTF-8 JSON bytes (see call.rs for why bytes).
  function callBytes(call) {
    if (call instanceof Uint8Array) return call;
    return encoder.encode(typeof call === 'string' ? call : callJson(call));
  }

  function randomBytes(n) {
    return globalThis.crypto.getRandomValues(new Uint8Array(n));
  }

  // A messageId's 16 random bytes, cut from a 4 KB draw: one
  // crypto.getRandomValues call costs 3-5 us in Node 20 (webcrypto's
  // argument checks), as much as the core's whole handleCall of a small
  // call. The uuid package pools its random bytes the same way.
  let pool = new Uint8Array(0);
  let poolAt = 0;
  function randomId() {
    if (poolAt + 16 > pool.length) {
      pool = randomBytes(4096);
      poolAt = 0;
    }
    poolAt += 16;
    return pool.subarray(poolAt - 16, poolAt);
  }

  // A jitter seed from OS randomness: 53 bits, as many as a number holds.
  function seed() {
    const v = new DataView(randomBytes(8).buffer);
    return v.getUint32(0) * 2 ** 21 + (v.getUint32(4) >>> 11);
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

  // One request; resolves to the report the core's handleResponse takes.
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
      return { status, retryAfter: r.headers.get('retry-after') ?? undefined };
    } catch (e) {
      const [kind, message] = failureKind(e);
      return { error: kind, message };
    }
  }

  // Runs a loop (a generator of ['send', [[key, request, deadlineMs]...]]
  // or ['wait', ms | undefined] steps): a step's requests go out together.
  async function run(steps, fetchFn, wait) {
    let reply;
    for (;;) {
      const { value, done } = steps.next(reply);
      if (done) return value;
      const [kind, arg] = value;
      if (kind === 'send') {
        reply = await Promise.all(arg.map(async ([key, request, deadlineMs]) => {
          const report = await send(fetchFn, request, deadlineMs);
          return [key, Date.now(), report];
        }));
      } else {
        await wait(arg);
        reply = undefined;
      }
    }
  }

  function finish(d, outcome) {
    const log = d.log;
    if (outcome.kind === 'delivered') return { delivered: true, endpoint: outcome.endpoint, attempts: outcome.attempt, log };
    if (outcome.kind === 'disabled') return { delivered: false, endpoint: null, attempts: 0, log };
    const err = error(outcome.reason, d.errorMessage ?? outcome.reason);
    err.outcome = outcome;
    err.log = log;
    throw err;
  }

  // A delivery's host loop: send what is due (a whole round at once in
  // parallel mode), report each answer, sleep until the core's timer.
  function* deliverySteps(d) {
    for (;;) {
      const sends = [];
      for (let a = d.pollRequest(Date.now()); a; a = d.pollRequest(Date.now())) sends.push([a.attempt, a.request, a.deadlineMs]);
      if (sends.length) {
        for (const [attempt, ended, report] of yield ['send', sends]) d.handleResponse(ended, attempt, report);
        continue;
      }
      const outcome = d.pollOutcome();
      if (outcome) return finish(d, outcome);
      const wake = d.pollTimeout();
      yield ['wait', wake === undefined ? undefined : wake - Date.now()];
      d.handleTimeout(Date.now());
    }
  }

  class Webhooks {
    #core;
    #timing;
    constructor({ endpoints, sharedSecret, mode, timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs } = {}) {
      const secret = sharedSecret == null ? null : textOf(sharedSecret, 'sharedSecret');
      this.#core = new wasm.WebhooksCore(toJson({ endpoints, sharedSecret: secret, mode }));
      // Large request bodies are signed by the platform (see sign()); the
      // core decides which, and which header carries the signature.
      if (platform.hmacSha1 && secret) this.#core.setNativeHmac((at, len) => platform.hmacSha1(secret, signing.bytesAt(at, len)));
      this.#timing = { timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs };
    }

    get urls() {
      return this.#core.urls;
    }

    get mode() {
      return this.#core.mode;
    }

    /** @internal The wasm settings, for Delivery. */
    get _core() {
      return this.#core;
    }

    request(call, endpoint = 0, nowMs = Date.now()) {
      // The call's text goes into the scratch buffer and the packed request
      // comes back in it: "<n>\n<url>\n<name>\n<value>…\n<body>" (see
      // webhooks.rs).
      const len = this.#core.requestScratch(signing.toScratch(callText(call), null), endpoint, nowMs);
      const s = decoder.decode(signing.scratchOf(len).subarray(0, len));
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
      return this.#core.isEnabledFor(callBytes(call));
    }

    delivery(call, { nowMs = Date.now(), seed: s } = {}) {
      return new Delivery(this, call, { ...this.#timing, nowMs, seed: s });
    }

    async deliver(call, { fetch: fetchFn = globalThis.fetch } = {}) {
      const d = this.delivery(call);
      try {
        return await run(deliverySteps(d), fetchFn, sleep);
      } finally {
        d.free();
      }
    }
  }

  // A report object as the core's positional arguments.
  const reportArgs = ({ status, retryAfter, error: kind, message } = {}) => [status, retryAfter, kind, message];

  // The sans-IO delivery, for hosts that drive and persist it themselves.
  // Without a seed, its jitter is seeded from crypto.getRandomValues.
  class Delivery {
    #core;
    constructor(webhooks, call, { nowMs = Date.now(), seed: s = seed(), timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs } = {}) {
      if (webhooks === FROM_JSON) {
        this.#core = call;
        return;
      }
      if (!(webhooks instanceof Webhooks)) throw error('invalid_argument', 'webhooks must be a Webhooks');
      this.#core = new wasm.DeliveryCore(webhooks._core, callBytes(call), nowMs,
        { seed: s, timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs });
    }

    pollRequest(nowMs) { return this.#core.pollRequest(nowMs); }
    handleResponse(nowMs, attempt, report) { this.#core.handleResponse(nowMs, attempt, ...reportArgs(report)); }
    handleTimeout(nowMs) { this.#core.handleTimeout(nowMs); }
    pollTimeout() { return this.#core.pollTimeout(); }
    pollOutcome() { return this.#core.pollOutcome(); }
    get outcome() { return this.#core.outcome; }
    get errorMessage() { return this.#core.errorMessage; }
    get log() { return this.#core.log; }
    get body() { return this.#core.body; }
    get messageId() { return this.#core.messageId; }
    get mode() { return this.#core.mode; }
    get done() { return this.#core.done; }
    toJSON() { return this.#core.toJSON(); }
    static fromJSON(text, webhooks) {
      if (!(webhooks instanceof Webhooks)) throw error('invalid_argument', 'webhooks must be the Webhooks the delivery was made with');
      return new Delivery(FROM_JSON, wasm.DeliveryCore.fromJSON(text, webhooks._core));
    }
    free() { this.#core.free(); }
  }
  const FROM_JSON = Symbol('fromJSON');

  // The batching client's state machine. Without a seed, its jitter is
  // seeded from crypto.getRandomValues.
  class Batcher {
    #core;
    constructor(options = {}, nowMs = Date.now()) {
      const o = { ...options };
      if (o.seed === undefined) o.seed = seed();
      this.#core = new wasm.BatcherCore(o, nowMs);
    }

    handleCall(nowMs, call, random = randomId()) { return this.#core.handleCall(nowMs, callBytes(call), random); }
    prepare(nowMs, call, random = randomId()) { return this.#core.prepare(nowMs, callBytes(call), random); }
    handleMessage(message) {
      if (!(message instanceof wasm.MessageCore)) throw error('invalid_argument', 'message must come from prepare()');
      this.#core.handleMessage(message);
    }
    flush(nowMs) { this.#core.flush(nowMs); }
    shutdown() { this.#core.shutdown(); }
    pollRequest(nowMs) { return this.#core.pollRequest(nowMs); }
    handleResponse(nowMs, batchId, report) { this.#core.handleResponse(nowMs, batchId, ...reportArgs(report)); }
    handleTimeout(nowMs) { this.#core.handleTimeout(nowMs); }
    pollTimeout() { return this.#core.pollTimeout(); }
    pollEvent() { return this.#core.pollEvent(); }
    get queued() { return this.#core.queued; }
    get inBatches() { return this.#core.inBatches; }
    get idle() { return this.#core.idle; }
    free() { this.#core.free(); }
  }

  const KEEPALIVE_LIMIT = 64 * 1024; // fetch keepalive's in-flight body budget (the Fetch standard)

  // The batching client's sender loop: report the batcher's events, send
  // the batches due, wait for the batcher's timer or a wake-up. It ends
  // once the client is closed and nothing is left.
  function* senderSteps(client) {
    const b = client._batcher;
    for (;;) {
      const now = Date.now();
      b.handleTimeout(now);
      client._drainEvents();
      const sends = [];
      for (let r = b.pollRequest(now); r; r = b.pollRequest(now)) sends.push([r.batchId, r.request, r.deadlineMs]);
      if (sends.length) {
        for (const [batchId, ended, report] of yield ['send', sends]) b.handleResponse(ended, batchId, report);
        continue;
      }
      if (client._closed && b.idle) return;
      const wake = b.pollTimeout();
      yield ['wait', wake === undefined ? undefined : wake - now];
    }
  }

  class Client {
    constructor({ writeKey, endpoint, batchPath, flushAt, flushAfter, maxQueue, maxAttempts, maxRetryMs, timeoutMs,
                  backoffBaseMs, backoffCapMs, onError, disable = false, fetch: fetchFn } = {}) {
      this._batcher = new Batcher({ writeKey, endpoint, batchPath, flushAt, flushAfterMs: flushAfter, maxQueue, maxAttempts,
        maxRetryMs, requestTimeoutMs: timeoutMs, backoffBaseMs, backoffCapMs });
      this.onError = onError;
      this._disable = Boolean(disable);
      this._fetch = fetchFn || ((...args) => globalThis.fetch(...args));
      // Per-call callbacks by messageId, each with its message's JSON, until
      // the batcher reports the message delivered or failed.
      this._waiting = new Map();
      this._loop = null;
      this._wake = null;
      this._progress = [];
      this._closed = false;
      if (platform.onExit) platform.onExit(this);
      if (typeof globalThis.addEventListener === 'function' && typeof document !== 'undefined') {
        globalThis.addEventListener('pagehide', () => this._pagehide());
      }
    }

    identify(fields, callback) { return this._enqueue('identify', fields, callback); }
    track(fields, callback) { return this._enqueue('track', fields, callback); }
    page(fields, callback) { return this._enqueue('page', fields, callback); }
    screen(fields, callback) { return this._enqueue('screen', fields, callback); }
    group(fields, callback) { return this._enqueue('group', fields, callback); }
    alias(fields, callback) { return this._enqueue('alias', fields, callback); }

    _enqueue(type, fields, callback) {
      if (callback === undefined && !this._disable) {
        const id = this._batcher.handleCall(Date.now(), callJson({ type, ...fields }));
        this._kick();
        return id;
      }
      if (callback !== undefined && typeof callback !== 'function') throw error('invalid_argument', 'callback must be a function');
      const done = callback && ((err, json) => callback(err, JSON.parse(json)));
      return this._submit(this._prepare(type, fields), done);
    }

    /** @internal The message for a call, checked and completed, not queued. */
    _prepare(type, fields) {
      return this._batcher.prepare(Date.now(), callJson({ type, ...fields }));
    }

    /** @internal Queues a prepared message; `done(err, json)`, if given, is
     * called once, when the message is delivered (err undefined) or fails.
     * A disabled client queues nothing and calls `done` as delivered.
     * `json`: the message's text, when the caller has already read it. */
    _submit(message, done, json = done ? message.json : undefined) {
      const id = message.messageId;
      if (this._disable) {
        message.free();
        if (done) queueMicrotask(() => this._call(done, undefined, json));
        return id;
      }
      this._batcher.handleMessage(message);
      if (done) {
        const list = this._waiting.get(id);
        if (list) list.push([done, json]);
        else this._waiting.set(id, [[done, json]]);
      }
      this._kick();
      return id;
    }

    // The oldest callback waiting on `id` (ids given by the caller may repeat).
    _settleOne(id, err, json) {
      const list = this._waiting.get(id);
      if (!list) return;
      const [done, kept] = list.shift();
      if (!list.length) this._waiting.delete(id);
      this._call(done, err, json ?? kept);
    }

    _call(done, err, json) {
      try {
        done(err, json);
      } catch (e) {
        console.error('callpost: a call\'s callback threw', e);
      }
    }

    _report(ev) {
      if (ev.kind === 'delivered') {
        if (this._waiting.size) for (const id of ev.messageIds) this._settleOne(id, undefined);
        return;
      }
      if (ev.kind !== 'failed') return;
      const err = error(ev.code, ev.reason);
      if (this._waiting.size) for (const m of ev.messages) this._settleOne(m.messageId, err, m.json);
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
      for (let ev = this._batcher.pollEvent(); ev; ev = this._batcher.pollEvent()) this._report(ev);
    }

    // Starts the sender loop, or wakes it.
    _kick() {
      if (this._wake) {
        this._wake();
        return;
      }
      if (this._loop) return;
      this._loop = run(senderSteps(this), this._fetch, (ms) => this._wait(ms)).finally(() => {
        this._loop = null;
        this._settle();
      });
    }

    // The sender sleeps until its timer or a wake-up. A pending timer must
    // not keep Node alive: the exit hook flushes.
    _wait(ms) {
      this._settle();
      return new Promise((resolve) => {
        let timer;
        const done = () => {
          clearTimeout(timer);
          this._wake = null;
          resolve();
        };
        this._wake = done;
        if (ms !== undefined) {
          timer = setTimeout(done, Math.max(0, ms));
          if (typeof timer.unref === 'function') timer.unref();
        }
      });
    }

    // flush() callers look at the batcher again.
    _settle() {
      for (const check of this._progress.splice(0)) check();
    }

    /** Sends everything queued now; settles when all of it is delivered or reported. */
    flush() {
      this._batcher.flush(Date.now());
      const done = new Promise((resolve) => {
        const check = () => (this._batcher.idle || !this._loop ? resolve() : this._progress.push(check));
        this._progress.push(check);
      });
      this._kick();
      if (this._batcher.idle) this._settle();
      return done;
    }

    /** Flushes (up to timeoutMs), then reports whatever is left to onError. */
    async close({ timeoutMs = DEFAULTS.shutdownTimeoutMs } = {}) {
      if (this._closed) return;
      let timer;
      await Promise.race([this.flush(), new Promise((r) => { timer = setTimeout(r, timeoutMs); })]);
      clearTimeout(timer);
      this._closed = true;
      this._batcher.shutdown();
      this._drainEvents();
      if (this._wake) this._wake();
    }

    // The page is going away: send what is queued with keepalive fetches,
    // which outlive the page (sendBeacon cannot carry Authorization).
    _pagehide() {
      const now = Date.now();
      this._batcher.flush(now);
      for (let b = this._batcher.pollRequest(now); b; b = this._batcher.pollRequest(now)) {
        const keepalive = b.request.body.length <= KEEPALIVE_LIMIT;
        send(this._fetch, b.request, b.deadlineMs, { keepalive }).then((report) => {
          this._batcher.handleResponse(Date.now(), b.batchId, report);
          this._drainEvents();
        });
      }
    }
  }

  async function init() {
    return api;
  }

  const api = {
    stringify, sign, verify, verifyParsed, verifyRequest, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
    traitName: wasm.traitName, parseTimestamp: wasm.parseTimestamp,
    Webhooks, Client, Signer, Delivery, Batcher, DEFAULTS, VERSION: wasm.version(), USER_AGENT: wasm.userAgent(),
    MAX_MESSAGE_BYTES: DEFAULTS.maxMessageBytes, init,
  };
  return api;
}

export function makeClient(wasm, platform) {
  const { Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES } = makeApi(wasm, platform);
  const api = { Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES, init: async () => api };
  return api;
}

// `callpost/segment`: @segment/analytics-node 3.x's `Analytics`, over the
// batching Client (so over the core's Batcher: its checks, ids, limits and
// retries). Segment's options map to the Client's; its defaults are the
// core's `segment::NODE_DEFAULTS`. Where this differs from Segment's SDK,
// the README's migration section says so.
export function makeSegment(wasm, platform) {
  const client = makeClient(wasm, platform);
  const { Client, VERSION } = client;
  const error = (code, message) => errorOf(wasm, code, message);
  const SEGMENT_DEFAULTS = Object.freeze(JSON.parse(wasm.segmentDefaults()));
  const D = SEGMENT_DEFAULTS;

  // Segment's emitter (analytics-generic-utils' Emitter): on, once, off,
  // emit; no Node dependency, so the class runs in every runtime.
  class Emitter {
    #listeners = new Map();
    on(event, listener) {
      const list = this.#listeners.get(event);
      if (list) list.push(listener);
      else this.#listeners.set(event, [listener]);
      return this;
    }
    once(event, listener) {
      const wrapper = (...args) => {
        this.off(event, wrapper);
        listener.apply(this, args);
      };
      return this.on(event, wrapper);
    }
    off(event, listener) {
      const list = this.#listeners.get(event);
      if (list) this.#listeners.set(event, list.filter((l) => l !== listener));
      return this;
    }
    emit(event, ...args) {
      for (const l of this.#listeners.get(event) ?? []) l.apply(this, args);
      return this;
    }
    listenerCount(event) {
      return this.#listeners.get(event)?.length ?? 0;
    }
  }

  // What Segment's callbacks and events carry: the message (`event`, parsed
  // when first read) and its delivery failure, if any.
  class Context {
    #json;
    #event;
    #failure;
    constructor(id, json, failure) {
      this.id = id;
      this.#json = json;
      this.#failure = failure;
    }
    get event() {
      this.#event ??= JSON.parse(this.#json);
      return this.#event;
    }
    failedDelivery() {
      return this.#failure;
    }
    logs() {
      return [];
    }
    toJSON() {
      return { id: this.id, event: this.event, logs: [], metrics: [] };
    }
  }

  // A request's headers as Segment's events show them: a plain object, the
  // write key (Authorization) masked, as callpost shows no secret.
  function shownHeaders(pairs) {
    const out = {};
    for (const [k, v] of pairs) out[k] = k.toLowerCase() === 'authorization' ? v.replace(/ .*/, ' ***') : v;
    return out;
  }

  // Segment's `httpClient`: a fetch-like function, or an object whose
  // makeRequest({url, method, headers, body, httpRequestTimeout}) resolves
  // to {status, statusText, headers}. Either is given plain-object headers,
  // as Segment gives them.
  function fetchOf(httpClient, timeoutMs) {
    if (httpClient === undefined || httpClient === null) return (url, init) => globalThis.fetch(url, init);
    if (typeof httpClient === 'function') return (url, init) => httpClient(url, { ...init, headers: Object.fromEntries(init.headers) });
    if (typeof httpClient.makeRequest !== 'function') {
      throw error('invalid_argument', 'httpClient must be a fetch-like function or an object with makeRequest()');
    }
    return async (url, init) => {
      const r = await httpClient.makeRequest({
        url, method: init.method, headers: Object.fromEntries(init.headers), body: init.body, httpRequestTimeout: timeoutMs,
      });
      const headers = r.headers && typeof r.headers.get === 'function' ? r.headers : new Headers(r.headers ?? {});
      return { status: r.status, statusText: r.statusText ?? '', type: 'basic', headers, arrayBuffer: async () => undefined };
    };
  }

  class Analytics extends Emitter {
    #client;
    #pending = 0;
    #closed = false;
    #closeTimeoutMs;

    constructor(settings = {}) {
      super();
      const { writeKey, host, path, flushAt, maxEventsInBatch, flushInterval = D.flushIntervalMs, maxRetries = D.maxRetries,
              httpRequestTimeout = D.httpRequestTimeoutMs, disable, httpClient, oauthSettings,
              maxTotalBackoffDuration = D.maxTotalBackoffDurationMs / 1000 } = settings;
      if (!writeKey) throw error('invalid_argument', 'writeKey is missing.');
      if (oauthSettings) {
        // Segment's OAuth flow signs a JWT for its own token server; a relay
        // or another tracking API takes the write key.
        throw error('invalid_argument', 'oauthSettings are not supported; use the write key');
      }
      // analytics-node resolves `path` against `host` as a URL does.
      let url;
      try {
        url = new URL(path ?? '/v1/batch', host ?? 'https://api.segment.io');
      } catch {
        throw error('invalid_endpoint', 'host and path do not make a URL');
      }
      const send = fetchOf(httpClient, httpRequestTimeout);
      this.#client = new Client({
        writeKey,
        endpoint: url.origin,
        batchPath: url.pathname.replace(/\/$/, ''),
        flushAt: Math.max(1, flushAt ?? maxEventsInBatch ?? D.flushAt),
        flushAfter: flushInterval,
        maxAttempts: maxRetries + 1,
        maxRetryMs: Math.round(maxTotalBackoffDuration * 1000),
        timeoutMs: httpRequestTimeout,
        disable,
        fetch: (reqUrl, init) => this.#observed(send, reqUrl, init),
        // Each failed message is reported to its callback and the `error`
        // event; with no `error` listener, the Client's own report.
        onError: (err, messages) => {
          if (!this.listenerCount('error')) console.error(`callpost: ${messages.length} messages failed: ${err.message}`);
        },
      });
      this.#closeTimeoutMs = (Math.max(D.closeTimeoutFloorMs, flushInterval) * D.closeTimeoutPercent) / 100;
      this.ready = Promise.resolve();
    }

    get VERSION() {
      return VERSION;
    }

    async #observed(send, url, init) {
      const shown = this.listenerCount('http_request') || this.listenerCount('http_response') ? shownHeaders(init.headers) : null;
      if (shown) this.emit('http_request', { body: init.body, method: init.method, url, headers: shown });
      const r = await send(url, init);
      if (shown) {
        const headers = {};
        r.headers?.forEach?.((v, k) => { headers[k.toLowerCase()] = v; });
        this.emit('http_response', { status: r.status, statusText: r.statusText, url, body: init.body, headers });
      }
      return r;
    }

    identify({ userId, anonymousId, traits = {}, context, timestamp, integrations, messageId } = {}, callback) {
      this.#dispatch({ type: 'identify', userId, anonymousId, traits, context, timestamp, integrations, messageId }, callback);
    }

    track({ userId, anonymousId, event, properties, context, timestamp, integrations, messageId } = {}, callback) {
      this.#dispatch({ type: 'track', userId, anonymousId, event, properties: properties ?? {}, context, timestamp, integrations, messageId }, callback);
    }

    page({ userId, anonymousId, category, name, properties, context, timestamp, integrations, messageId } = {}, callback) {
      // analytics-node copies a page's category into its properties.
      const props = category == null ? { ...properties } : { ...properties, category };
      this.#dispatch({ type: 'page', userId, anonymousId, category: category ?? undefined, name: name ?? undefined,
        properties: props, context, timestamp, integrations, messageId }, callback);
    }

    screen({ userId, anonymousId, category, name, properties, context, timestamp, integrations, messageId } = {}, callback) {
      this.#dispatch({ type: 'screen', userId, anonymousId, category: category ?? undefined, name: name ?? undefined,
        properties: { ...properties }, context, timestamp, integrations, messageId }, callback);
    }

    group({ userId, anonymousId, groupId, traits = {}, context, timestamp, integrations, messageId } = {}, callback) {
      this.#dispatch({ type: 'group', userId, anonymousId, groupId, traits, context, timestamp, integrations, messageId }, callback);
    }

    alias({ userId, previousId, context, timestamp, integrations, messageId } = {}, callback) {
      this.#dispatch({ type: 'alias', userId, previousId: previousId ?? undefined, context, timestamp, integrations, messageId }, callback);
    }

    // Checks and completes the call now (a bad call throws, as Segment's
    // ValidationError does), then queues it; `callback(err, ctx)` and the
    // events follow its delivery or failure.
    #dispatch({ type, context, integrations, ...fields }, callback) {
      if (callback !== undefined && typeof callback !== 'function') throw error('invalid_argument', 'callback must be a function');
      const message = this.#client._prepare(type, { ...fields, context: context ?? {}, integrations: integrations ?? {} });
      if (this.#closed || this.#client._closed) {
        const event = JSON.parse(message.json);
        message.free();
        this.emit('call_after_close', event);
        return;
      }
      const id = message.messageId;
      const json = message.json;
      this.#pending++;
      const done = (err) => {
        const ctx = new Context(id, json, err ? { reason: err } : undefined);
        this.#pending--;
        try {
          if (callback) callback(err, ctx);
        } finally {
          if (err) this.emit('error', { code: 'delivery_failure', reason: err, ctx });
          else this.emit(type, ctx);
          if (!this.#pending) this.emit('drained');
        }
      };
      try {
        this.#client._submit(message, done, json);
      } catch (err) {
        // Not queued (the queue is full): reported as a failed delivery.
        queueMicrotask(() => done(err));
      }
    }

    /** Sends everything queued; resolves once each call is delivered or
     * reported, or when `timeout` (ms) passes. `close` stops the client. */
    async flush({ timeout, close = false } = {}) {
      if (close) {
        this.#closed = true;
        await this.#client.close({ timeoutMs: timeout ?? this.#closeTimeoutMs });
        return;
      }
      const flushed = this.#client.flush();
      if (!timeout) return flushed;
      let timer;
      await Promise.race([flushed, new Promise((r) => { timer = setTimeout(r, timeout); })]);
      clearTimeout(timer);
    }

    /** Stops taking calls, sends what is queued, and resolves when all of it
     * is delivered or reported; by default it waits at most
     * max(60 s, flushInterval) × 1.25, then reports the rest as failed. */
    closeAndFlush({ timeout = this.#closeTimeoutMs } = {}) {
      return this.flush({ timeout, close: true });
    }

    register() {
      throw error('invalid_argument', 'callpost/segment does not run Segment plugins');
    }

    deregister() {
      throw error('invalid_argument', 'callpost/segment does not run Segment plugins');
    }
  }

  const api = { Analytics, Context, SEGMENT_DEFAULTS, VERSION, init: async () => api };
  return api;
}

// The start of the entries that import the .wasm statically (workerd and
// edge-light). Next.js runs edge routes in a Node vm context (in `next build`
// and `next start`), where the imported module belongs to the outer realm:
// wasm-bindgen's `instanceof WebAssembly.Module` is false for it, and it
// would try to compile it again as bytes. The engine instantiates a module
// of any realm, so the module is given this realm's prototype.
export function staticInit(wasm, module, make) {
  if (!(module instanceof WebAssembly.Module) && Object.prototype.toString.call(module) === '[object WebAssembly.Module]') {
    Object.setPrototypeOf(module, WebAssembly.Module.prototype);
  }
  wasm.initSync({ module });
  return make(wasm, {});
}

// An entry's `init(input)` for browsers and bundlers: loads
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
