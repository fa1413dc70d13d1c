// The batching client: Batcher, the core's sans-IO batcher, and Client,
// which runs it (senderSteps, on host.mjs's run) with per-call callbacks,
// an exit hook and a page-hide flush. makeClient is the `callpost/client`
// entry's API, over the client-only wasm module (the crate's `client`
// feature); the full API (full.mjs) and `callpost/segment` (segment.mjs)
// build on makeBatching.
import { makeError } from './errors.mjs';
import { makeJson } from './json.mjs';
import { randomId, seed, send, run, reportArgs } from './host.mjs';

// Batcher and Client, with what they are built on and the other APIs
// share: the module's `error`, the core's DEFAULTS and the JSON
// conversions (json.mjs). `platform.onExit(client)`, when given (Node),
// flushes each client as the process ends.
export function makeBatching(wasm, platform) {
  const error = makeError(wasm);
  const DEFAULTS = Object.freeze(JSON.parse(wasm.defaults()));
  const json = makeJson(wasm, error, DEFAULTS.maxDepth);
  const { callJson, callBytes } = json;

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
    pollWake() { return this.#core.pollWake(); }
    pollEvent() { return this.#core.pollEvent(); }
    get queued() { return this.#core.queued; }
    get inBatches() { return this.#core.inBatches; }
    get idle() { return this.#core.idle; }
    free() { this.#core.free(); }
  }

  const KEEPALIVE_LIMIT = 64 * 1024; // fetch keepalive's in-flight body budget (the Fetch standard)

  // The batching client's sender loop: report the batcher's events, send
  // the batches due, wait for the batcher's timer or a wake-up. It ends
  // once the client is closed and nothing is left. It has deliverySteps'
  // shape (webhooks.mjs) but is kept apart: calls arrive between its
  // passes, so each pass starts with the timer and the events, and it ends
  // on close, not on an outcome.
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
        this._kickIfDue();
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
      this._kickIfDue();
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

    // After a call is queued: the sender needs waking only when the core
    // says its wake-up time moved earlier (the first message, or a full
    // batch); otherwise its timer already covers the call.
    _kickIfDue() {
      if (this._batcher.pollWake() || !this._loop) this._kick();
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

  return { Batcher, Client, error, DEFAULTS, json };
}

export function makeClient(wasm, platform) {
  const { Batcher, Client, DEFAULTS, json } = makeBatching(wasm, platform);
  const api = {
    Client, Batcher, stringify: json.stringify, parseTimestamp: wasm.parseTimestamp, DEFAULTS, VERSION: wasm.version(),
    MAX_MESSAGE_BYTES: DEFAULTS.maxMessageBytes, init: async () => api,
  };
  return api;
}
