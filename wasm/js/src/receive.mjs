// Receiving webhooks: receive(), Receiver, SeenIds, and the framework glue
// (webhookHandler for web-standard Request/Response, nodeMiddleware for
// Node's req/res). Which header, which bytes it covers, the ids, the HTTP
// statuses and the LRU's size are the core's (receive.rs). Part of
// makeSigning's API (signing.mjs), the `callpost/verify` entry.

// The second argument is what signing.mjs shares with it.
import { nowOf } from './standard.mjs';

export function makeReceiving(wasm, { error, encoder, decoder, verify, headerLists, toleranceOf }) {
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

  // [value, header, coverage, ids]: the core verifies (X-Signature under
  // `secrets`, the Standard scheme under `options.standardSecrets`, as
  // receive.rs chooses), JSON.parse builds the value (the core has checked
  // the body is JSON).
  function check(body, headers, secrets, options) {
    const raw = rawBody(body);
    const [names, values] = headerLists(headers);
    const o = options || {};
    const [header, coverage, ids] = wasm.receive(
      raw, names.join('\n'), values.join('\n'), secrets ?? null, o.standardSecrets ?? null,
      nowOf(o.now), toleranceOf(o), Boolean(o.allowFirstEventSignature),
    );
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

  // `secrets` verify X-Signature, `options.standardSecrets` (whsec_) the
  // Standard scheme; either or both (which one a request is held to is the
  // core's rule, receive.rs).
  class Receiver {
    #secrets;
    #standard;
    #seen;
    constructor(secrets, options = {}) {
      const standardSecrets = options.standardSecrets ?? null;
      if ((secrets === undefined || secrets === null) && standardSecrets === null) {
        throw error('invalid_argument', 'give secrets (X-Signature), options.standardSecrets (whsec_), or both');
      }
      this.#secrets = secrets ?? null;
      this.#standard = standardSecrets;
      this.#seen = seenHook(options.seen);
      this.allowFirstEventSignature = Boolean(options.allowFirstEventSignature);
      this.toleranceMs = toleranceOf(options);
    }

    // The verified webhook: its new calls (and their ids), the duplicates'
    // ids, the parsed body, the header and what it covers.
    async receive(body, headers) {
      const options = { standardSecrets: this.#standard, toleranceMs: this.toleranceMs, allowFirstEventSignature: this.allowFirstEventSignature };
      const [value, header, coverage, allIds] = check(body, headers, this.#secrets, options);
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

  return { verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal };
}
