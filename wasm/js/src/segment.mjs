// `callpost/segment`: @segment/analytics-node 3.x's `Analytics`, over the
// batching Client (so over the core's Batcher: its checks, ids, limits and
// retries). Segment's options map to the Client's; its defaults are the
// core's `segment::NODE_DEFAULTS`. Where this differs from Segment's SDK,
// the README's migration section says so.
import { makeBatching } from './client.mjs';

export function makeSegment(wasm, platform) {
  const { Client, error } = makeBatching(wasm, platform);
  const VERSION = wasm.version();
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
