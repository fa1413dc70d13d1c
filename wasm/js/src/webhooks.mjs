// Sending webhooks: Webhooks (the endpoints, the secret, a call's signed
// request) and Delivery, the core's sans-IO delivery of one call with its
// retries; Webhooks.deliver runs it (host.mjs's run). In the full API only.
import { seed, sleep, run, reportArgs } from './host.mjs';

// `signing`: makeSigning's scratch buffer (signing.mjs); `json`: makeJson's
// conversions (json.mjs).
export function makeWebhooks(wasm, platform, { error, signing, json }) {
  const { toJson, textOf, callText, callBytes } = json;
  const decoder = new TextDecoder('utf-8', { fatal: true });

  function finish(d, outcome) {
    const log = d.log;
    if (outcome.kind === 'delivered') return { delivered: true, endpoint: outcome.endpoint, attempts: outcome.attempt, log };
    if (outcome.kind === 'disabled') return { delivered: false, endpoint: null, attempts: 0, log };
    if (outcome.kind === 'filtered') return { delivered: false, endpoint: null, attempts: 0, log, filteredBy: outcome.rule };
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
      for (let a = d.pollRequest(Date.now()); a; a = d.pollRequest(Date.now())) sends.push([a.attempt, a.request, a.deadlineMs, a.endpoint]);
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

  // The bearer tokens of a destination's OAuth 2.0 endpoints: the core's
  // token sources (fetched, cached, refreshed before they expire, dropped
  // on a 401), one token request per grant at a time, over the deliveries'
  // fetch. A token that cannot be had fails the attempt at once.
  class Tokens {
    #sources = new Map();
    #busy = new Map();
    constructor(core, endpoints) {
      for (let i = 0; i < endpoints; i++) {
        const source = core.tokenSource(i, seed());
        if (source) this.#sources.set(i, source);
      }
    }

    has(endpoint) {
      return this.#sources.has(endpoint);
    }

    // `Bearer …` for `endpoint`, fetched first when due; throws the core's
    // token_unavailable error when there is none.
    async authorization(fetchFn, endpoint) {
      const source = this.#sources.get(endpoint);
      const before = this.#busy.get(endpoint) ?? Promise.resolve();
      const turn = before.then(() => this.#fetch(fetchFn, source));
      this.#busy.set(endpoint, turn.catch(() => undefined));
      await turn;
      return source.authorization(Date.now());
    }

    async #fetch(fetchFn, source) {
      const r = source.pollRequest(Date.now());
      if (!r) return;
      try {
        const answer = await fetchFn(r.url, {
          method: 'POST',
          headers: r.headers,
          body: r.body,
          redirect: 'manual',
          signal: AbortSignal.timeout(Math.max(1, r.deadlineMs - Date.now())),
        });
        const body = new Uint8Array(await answer.arrayBuffer()).subarray(0, source.answerBytes);
        try {
          source.handleResponse(Date.now(), answer.status, body);
        } catch {
          // Kept by the source: authorization() throws it.
        }
      } catch (e) {
        source.handleFailure(Date.now(), `${e?.name ?? 'Error'}: ${e?.message ?? e}`);
      }
    }

    rejected(endpoint, authorization) {
      this.#sources.get(endpoint)?.handleRejected(authorization);
    }
  }

  class Webhooks {
    #core;
    #timing;
    #tokens;
    constructor({ endpoints, sharedSecret, mode, method, signature, signingSecrets, filters, mapping, batch, timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs } = {}) {
      const secret = sharedSecret == null ? null : textOf(sharedSecret, 'sharedSecret');
      // method, signature, signingSecrets, filters, mapping and batch are checked by the
      // core's settings; `batch: true` is its defaults.
      const batching = batch === true ? {} : batch === false ? undefined : batch;
      this.#core = new wasm.WebhooksCore(toJson({ endpoints, sharedSecret: secret, mode, method, signature, signingSecrets, filters, mapping, batch: batching }));
      // Large request bodies are signed by the platform (see sign() in
      // signing.mjs); the core decides which, and which header carries the
      // signature.
      if (platform.hmacSha1 && secret) this.#core.setNativeHmac((at, len) => platform.hmacSha1(secret, signing.bytesAt(at, len)));
      this.#timing = { timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs };
      this.#tokens = new Tokens(this.#core, this.#core.urls.length);
    }

    get urls() {
      return this.#core.urls;
    }

    get mode() {
      return this.#core.mode;
    }

    get method() {
      return this.#core.method;
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
      return { method: this.#core.method, url, headers, body: s.slice(end + 1) };
    }

    isEnabledFor(call) {
      return this.#core.isEnabledFor(callBytes(call));
    }

    delivery(call, { nowMs = Date.now(), seed: s } = {}) {
      return new Delivery(this, call, { ...this.#timing, nowMs, seed: s });
    }

    async deliver(call, { fetch: fetchFn = globalThis.fetch } = {}) {
      this.#core.checkSentAsBuilt();
      const d = this.delivery(call);
      try {
        return await run(deliverySteps(d), fetchFn, sleep, this.#tokens);
      } finally {
        d.free();
      }
    }

    // The calls grouped as the destination's `batch` setting says (the
    // core's defaults without one): {batches: [{id, body, members}],
    // skipped: [[index, outcome]]}.
    pack(calls, nowMs = Date.now()) {
      if (!Array.isArray(calls)) throw error('invalid_argument', 'calls must be an array');
      const [batches, skipped] = this.#core.pack(calls.map(callBytes), nowMs);
      return { batches, skipped };
    }

    // Delivers calls several to a POST, each batch retried whole: one result
    // per call, in order. Rejects at the first batch that gives up; the
    // batches before it were delivered, the ones after it are not sent.
    async deliverBatch(calls, { fetch: fetchFn = globalThis.fetch } = {}) {
      this.#core.checkSentAsBuilt();
      const { batches, skipped } = this.pack(calls);
      const results = new Array(calls.length);
      // A call in no batch ended before any attempt, as it would alone.
      for (const [i, outcome] of skipped) results[i] = finish({ log: [] }, outcome);
      for (const b of batches) {
        const d = new Delivery(FOR_BATCH, wasm.DeliveryCore.forBatch(this.#core, b.id, b.body, Date.now(), { ...this.#timing, seed: seed() }));
        try {
          const result = await run(deliverySteps(d), fetchFn, sleep, this.#tokens);
          for (const i of b.members) results[i] = result;
        } finally {
          d.free();
        }
      }
      return results;
    }
  }

  // The sans-IO delivery, for hosts that drive and persist it themselves.
  // Without a seed, its jitter is seeded from crypto.getRandomValues.
  class Delivery {
    #core;
    constructor(webhooks, call, { nowMs = Date.now(), seed: s = seed(), timeoutMs, retryWindowMs, backoffBaseMs, backoffCapMs } = {}) {
      if (webhooks === FROM_JSON || webhooks === FOR_BATCH) {
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
  const FOR_BATCH = Symbol('forBatch');

  return { Webhooks, Delivery };
}
