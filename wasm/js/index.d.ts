// Hand-written rather than generated (tsify): the public API is the wrapper
// layer in api.mjs (fetch loops, the Client), not the raw wasm exports, and
// its option objects are plain JS shapes.

/** A JSON value as JSON.stringify accepts it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined };

/**
 * A Segment-spec call: `type` plus Segment's camelCase fields, or its JSON text. An id given as a `bigint`, or as a
 * `number` that is a safe integer, is sent as its exact decimal string; another `number` id throws.
 */
export interface CallObject {
  type: 'identify' | 'track' | 'page' | 'screen' | 'group' | 'alias' | 'delete';
  userId?: string | number | bigint;
  anonymousId?: string | number | bigint;
  event?: string;
  name?: string;
  category?: string;
  properties?: { [key: string]: Json | undefined };
  traits?: { [key: string]: Json | undefined };
  context?: { [key: string]: Json | undefined };
  integrations?: { [key: string]: Json | undefined };
  groupId?: string | number | bigint;
  previousId?: string | number | bigint;
  /** ISO 8601 with an offset, or a Date. */
  timestamp?: string | Date;
  messageId?: string | number | bigint;
}
export type Call = CallObject | string | Uint8Array;

/**
 * Every error thrown by callpost: `.code` is the core's stable code (the same in Rust and Python), and `.name` the
 * class the core's registry names for it. `NotJSONError` and `InvalidArgumentError` are `TypeError`s.
 */
export interface CallpostError extends Error {
  name: 'InvalidCallError' | 'JSONValueError' | 'NotJSONError' | 'SettingsError' | 'SignatureError' | 'ConfigError'
    | 'MessageTooLargeError' | 'QueueFullError' | 'ClosedError' | 'StateError' | 'InvalidArgumentError' | 'DeliveryError';
  code: string;
}

export interface DeliveryError extends CallpostError {
  name: 'DeliveryError';
  /** 'all_endpoints_rejected' | 'window_exhausted' | 'mapped_body_too_large' | 'invalid_url_value' */
  code: string;
  outcome: DeliveryOutcome;
  log: AttemptRecord[];
}

export interface HttpRequest {
  /** `POST`, or a Webhooks destination's `PUT` or `PATCH`. */
  method: 'POST' | 'PUT' | 'PATCH';
  url: string;
  headers: [string, string][];
  /** UTF-8 JSON; X-Signature signs exactly these bytes. */
  body: string;
}

export type Outcome =
  | { kind: 'response'; status: number; retryAfter?: string }
  | { kind: 'timeout' }
  | { kind: 'connection'; message: string }
  | { kind: 'tls'; message: string }
  | { kind: 'token'; message: string }
  /** Not sent: a host held it back while its endpoint was protected (the relay's circuit breaker or a receiver's Retry-After). */
  | { kind: 'held'; until: number; reason: string };

export interface AttemptRecord {
  attempt: number;
  /** 1-based round: in parallel mode every live endpoint gets one attempt per round. */
  round: number;
  endpoint: number;
  sentAt: number;
  endedAt: number;
  outcome: Outcome;
  verdict: 'success' | 'retry' | 'reject';
}

export type DeliveryOutcome =
  | { kind: 'delivered'; endpoint: number; attempt: number; at: number }
  | { kind: 'gave_up'; reason: 'window_exhausted' | 'all_endpoints_rejected' | 'mapped_body_too_large' | 'invalid_url_value'; attempts: number; last: Outcome | null }
  | { kind: 'disabled' }
  | { kind: 'filtered'; rule: number };

export interface DeliveryResult {
  /** False only when nothing was sent: the call's integrations turned Webhooks off, or a filter dropped it. */
  delivered: boolean;
  /** The first endpoint that took the call. */
  endpoint: number | null;
  attempts: number;
  log: AttemptRecord[];
  /** The index of the filter rule that dropped the call. */
  filteredBy?: number;
}

/** A test on one field: `type`, `event`, `name`, `category`, the ids, or a dotted path under `properties`, `traits` or `context`. */
export type FilterTest = { field: string } & (
  | { equals: unknown } | { in: unknown[] } | { exists: boolean }
  | { gt: number } | { gte: number } | { lt: number } | { lte: number }
);
export type FilterCondition = FilterTest | { and: FilterCondition[] } | { or: FilterCondition[] } | { not: FilterCondition };
/** A destination filter rule (docs/operators.md, "Destination filters"). */
export type FilterRule =
  | { action: 'drop' | 'keep'; if: FilterCondition }
  | { action: 'drop_fields'; fields: string[]; if?: FilterCondition };

/** A mapping directive (docs/mappings.md); paths are into the call as Segment's message has it. */
export type MappingDirective =
  | { '@path': string }
  | { '@template': string }
  | { '@literal': unknown }
  | { '@if': ({ exists: MappingValue } | { blank: MappingValue }) & { then?: MappingValue; else?: MappingValue } }
  | { '@arrayPath': [string | MappingDirective] | [string | MappingDirective, Mapping] }
  | { '@default': MappingValue[] };
/** A raw JSON value, or a directive, at any depth. */
export type MappingValue = null | boolean | number | string | MappingValue[] | MappingDirective | { [key: string]: MappingValue };
/** A destination's mapping: the body's object, its values raw or directives. */
export type Mapping = { [key: string]: MappingValue };

/** HTTP Basic (RFC 7617), sent by every `deliver`. */
export interface BasicAuth {
  type: 'basic';
  username: string;
  password: string;
}

/**
 * An OAuth 2.0 client-credentials grant (RFC 6749 §4.4): `deliver` fetches
 * the bearer token with its `fetch`, keeps it for the `Webhooks`' later
 * deliveries, refreshes it before it expires and fetches a new one after a
 * receiver's 401; an attempt with no token fails as a `token` outcome.
 * `request` builds the requests without the token.
 */
export interface OAuth2Auth {
  type: 'oauth2';
  token_url: string;
  client_id: string;
  client_secret: string;
  /** Space-separated scopes. */
  scope?: string;
  audience?: string;
  /** Where the client's credentials go: `basic` (the default) or `body`. */
  client_auth?: 'basic' | 'body';
}

/** A client certificate and key in PEM, for mutual TLS: callpost-relay presents it; `deliver` refuses it (`invalid_auth`). */
export interface ClientCertificate {
  certificate: string;
  private_key: string;
}

export type Endpoint =
  | string
  | {
      url: string;
      headers?: Record<string, string>;
      auth?: BasicAuth | OAuth2Auth;
      client_certificate?: ClientCertificate;
    };
export type Secret = string | Uint8Array;

/** `JSON.stringify(value)`, but throwing (with `.code`) where JSON.stringify would silently change data. */
export function stringify(value: unknown): string;
/** Lowercase hex HMAC-SHA1. */
export function sign(secret: Secret, body: string | Uint8Array): string;
/** Constant-time check over the raw body, against one or several secrets. */
export function verify(body: string | Uint8Array, signature: string, secrets: Secret | Secret[]): boolean;
/** Verifies a parsed body by re-stringifying it as the sender did. */
export function verifyParsed(value: unknown, signature: string, secrets: Secret | Secret[]): boolean;
/** Finds X-Signature in a Headers object or a plain header map, then verifies. */
export function verifyRequest(body: string | Uint8Array, headers: Headers | Record<string, string | string[] | undefined>, secrets: Secret | Secret[]): boolean;

// -- Standard Webhooks -------------------------------------------------------

/** The three Standard Webhooks headers, to spread into a request's headers (a type, so it passes as a header map). */
export type StandardHeaders = {
  'webhook-id': string;
  /** Whole seconds since the epoch. */
  'webhook-timestamp': string;
  /** `v1,<base64 HMAC-SHA256>` per secret, space-separated. */
  'webhook-signature': string;
};
/** A time: milliseconds since the epoch or a Date; default the clock. */
export type Now = number | Date;
/** How far `webhook-timestamp` may be from the clock, either way (5 minutes, the specification's default). */
export const STANDARD_TOLERANCE_MS: number;
/**
 * Signs `body` the Standard Webhooks way: HMAC-SHA256 of `msgId.timestamp.body`
 * under each `whsec_` secret. Throws `malformed_secret` for a secret that is
 * not `whsec_` and base64.
 */
export function signStandard(msgId: string, body: string | Uint8Array, secrets: string | string[], now?: Now): StandardHeaders;
/**
 * Verifies a request's Standard Webhooks headers against its raw body: the
 * timestamp within `toleranceMs` of `now` (else `timestamp_too_old` /
 * `timestamp_too_new`), then a `v1` signature under one of the secrets,
 * compared in constant time (else `signature_mismatch`).
 */
export function verifyStandard(
  body: string | Uint8Array, headers: Headers | Record<string, string | string[] | undefined>, secrets: string | string[],
  options?: { now?: Now; toleranceMs?: number },
): { id: string; timestamp: number };

// -- Receiving webhooks ---------------------------------------------------

/** A request body as received: text or bytes (a Node Buffer is a Uint8Array). */
export type RawBody = string | Uint8Array | ArrayBuffer;
export type RequestHeaders = Headers | Record<string, string | string[] | undefined>;

export interface ReceiveOptions {
  /**
   * Accept a batch whose `X-Signature` covers only its first event (Segment's
   * Actions destination without "Use X-Segment-Signature Header"). The other
   * events are then unauthenticated. Default false: such a batch is refused
   * with code `first_event_signature`.
   */
  allowFirstEventSignature?: boolean;
  /**
   * `whsec_` secrets for the Standard Webhooks scheme. With only these (pass
   * `null` as `secrets`), a request must carry `webhook-signature`; with both
   * kinds, a request carrying it is held to it (no fallback) and one without
   * it to `X-Signature`.
   */
  standardSecrets?: string | string[] | null;
  /** How far `webhook-timestamp` may be from the clock (default `STANDARD_TOLERANCE_MS`). */
  toleranceMs?: number;
}

/**
 * Verifies a received webhook and returns its parsed body: one call (an
 * object) or a batch (an array). Uses `X-Segment-Signature` when present,
 * else `X-Signature`, or the Standard Webhooks headers under
 * `options.standardSecrets`. Throws a `SignatureError` with `code`
 * `missing_signature`, `malformed_signature`, `signature_mismatch`,
 * `first_event_signature`, `timestamp_too_old` or `timestamp_too_new`, a
 * `JSONValueError` for a verified body that is not JSON, and an
 * `InvalidArgumentError` for a parsed object passed as the body.
 */
export function receive(
  body: RawBody, headers: RequestHeaders, secrets: Secret | Secret[] | null,
  options?: ReceiveOptions & { now?: Now },
): any;

/** The `seen` hook: true when the id was processed before; otherwise remember it and return false. */
export type SeenFunction = (id: string) => boolean | Promise<boolean>;
export interface SeenHook {
  seen(id: string): boolean | Promise<boolean>;
  /** Called when the handler failed, so the sender's retry is processed. */
  forget?(id: string): void | Promise<void>;
}

/** The default `seen` hook: the last `capacity` ids (by default the core's, 10,000) in memory. */
export class SeenIds implements SeenHook {
  constructor(capacity?: number);
  readonly capacity: number;
  readonly size: number;
  seen(id: string): boolean;
  forget(id: string): void;
}

export interface ReceiverOptions extends ReceiveOptions {
  /** Duplicate filter: default a `SeenIds` of its own; `false` for none. */
  seen?: SeenFunction | SeenHook | false;
}

/** A verified webhook. */
export interface Webhook {
  /** The whole parsed body. */
  body: any;
  /** The calls not seen before, in body order: process these. */
  calls: any[];
  /** Their ids: `messageId`, else the request's signed id (the verified `webhook-id`, or under `X-Signature` `body_` and 16 bytes of the body's SHA-256 in hex; `.<index>` in a batch); null where none. The unsigned `Idempotency-Key` header is never an id. */
  ids: (string | null)[];
  /** Ids of the calls dropped as duplicates. */
  duplicates: string[];
  batch: boolean;
  /** `X-Signature` or `X-Segment-Signature`. */
  header: string;
  /** What the signature covers. */
  coverage: 'body' | 'first_event';
  /** Every call was seen before. */
  onlyDuplicates: boolean;
  /** The one new call of a single-call body, else null. */
  call: any | null;
}

export class Receiver {
  /** `secrets` (X-Signature), `options.standardSecrets` (whsec_), or both. */
  constructor(secrets: Secret | Secret[] | null, options?: ReceiverOptions);
  allowFirstEventSignature: boolean;
  toleranceMs: number;
  receive(body: RawBody, headers: RequestHeaders): Promise<Webhook>;
  /** The handler failed: forget the new ids so the retry is processed. */
  failed(webhook: Webhook): Promise<void>;
}

/**
 * A web-standard handler `(Request) => Promise<Response>` (Workers, Deno,
 * Bun, Next.js route handlers, Hono). Answers refusals (401 signature, 400
 * otherwise) and all-duplicate bodies (200) itself; otherwise calls
 * `handler`, whose Response (default 204) is the answer.
 */
export function webhookHandler(
  receiver: Receiver | (ReceiverOptions & { secrets?: Secret | Secret[] | null }),
  handler: (webhook: Webhook, request: Request) => Response | void | Promise<Response | void>,
): (request: Request) => Promise<Response>;

/** The answer to a refused webhook: 401 for a signature error, 400 otherwise. Rethrows errors that are not callpost's. */
export function refusal(error: unknown): { status: number; body: { error: string; message: string } };

/** Node middleware `(req, res, next)` (Express, plain http): sets `req.webhook`. */
export function nodeMiddleware(
  receiver: Receiver | (ReceiverOptions & { secrets?: Secret | Secret[] | null }),
): (req: any, res: any, next?: (err?: unknown) => void) => Promise<void>;

export function traitName(audience: string): string;
export function parseTimestamp(text: string): number;
export const USER_AGENT: string;
export const MAX_MESSAGE_BYTES: number;
/** callpost's version (the Rust workspace's). */
export const VERSION: string;

/** The core's limits and defaults, by name; durations in milliseconds. */
export interface Defaults {
  readonly flushAt: number; readonly flushAfterMs: number; readonly maxQueue: number; readonly maxAttempts: number;
  readonly maxRetryMs: number; readonly requestTimeoutMs: number; readonly maxInFlight: number;
  readonly batchBackoffBaseMs: number; readonly batchBackoffCapMs: number; readonly shutdownTimeoutMs: number;
  readonly maxMessageBytes: number; readonly maxBatchBytes: number; readonly maxEndpoints: number;
  readonly webhookTimeoutMs: number; readonly retryWindowMs: number; readonly deliveryBackoffBaseMs: number;
  readonly deliveryBackoffCapMs: number; readonly hostHmacMinBytes: number; readonly hostHmacRequestMinBytes: number;
  readonly seenCapacity: number; readonly maxDepth: number;
}
export const DEFAULTS: Defaults;

export interface WebhooksOptions {
  /** 1 to 5 endpoints. */
  endpoints: Endpoint[];
  sharedSecret?: Secret | null;
  /**
   * `parallel`: every round goes to every endpoint at once, as Segment's own integration did; `failover`: one
   * endpoint after another until one takes the call.
   * @default 'parallel'
   */
  /**
   * The HTTP method: the spec's `POST`, or `PUT` or `PATCH` for a receiver that updates a record; retries and
   * signatures are the same for each.
   * @default 'POST'
   */
  method?: 'POST' | 'PUT' | 'PATCH';
  mode?: 'parallel' | 'failover';
  /**
   * `segment`: `X-Signature` under `sharedSecret`; `standard`: the Standard Webhooks headers (`webhook-id`,
   * `webhook-timestamp`, `webhook-signature`) under each of `signingSecrets`; `both`: all of them.
   * @default 'segment'
   */
  signature?: 'segment' | 'standard' | 'both';
  /** `whsec_` secrets, each signing every request (two during a rotation); needed by `standard` and `both`. */
  signingSecrets?: string[];
  /** Rules that drop calls, or fields of them, before delivery (docs/operators.md, destination filters); checked here (`invalid_settings`). */
  filters?: FilterRule[];
  /**
   * The body each call is sent with, built by Segment Actions-style directives (`@path`, `@template`, `@if`,
   * `@arrayPath`, `@default`, `@literal`; docs/mappings.md) in place of the spec's body; checked here (`invalid_settings`).
   */
  mapping?: Mapping;
  /**
   * How `deliverBatch` packs calls: `true` for the defaults (1,000 calls, 500,000 bytes a POST), or the limits
   * (at most 4,000 calls; 64,000 to 500,000 bytes). `deliver` always sends one call.
   */
  batch?: boolean | { maxCalls?: number; maxBytes?: number };
  /** @default DEFAULTS.webhookTimeoutMs */
  timeoutMs?: number;
  /** @default DEFAULTS.retryWindowMs */
  retryWindowMs?: number;
  /** @default DEFAULTS.deliveryBackoffBaseMs */
  backoffBaseMs?: number;
  /** @default DEFAULTS.deliveryBackoffCapMs */
  backoffCapMs?: number;
}

export class Webhooks {
  constructor(options: WebhooksOptions);
  readonly urls: string[];
  readonly mode: 'parallel' | 'failover';
  readonly method: 'POST' | 'PUT' | 'PATCH';
  request(call: Call, endpoint?: number, nowMs?: number): HttpRequest;
  isEnabledFor(call: Call): boolean;
  /** The sans-IO delivery, to drive and persist yourself. Seeded from crypto.getRandomValues unless `seed` is given. */
  delivery(call: Call, options?: { nowMs?: number; seed?: number }): Delivery;
  /** fetch with a timeout, retries and rounds; rejects with a DeliveryError when it gives up. */
  deliver(call: Call, options?: { fetch?: typeof fetch }): Promise<DeliveryResult>;
  /** The calls grouped into batches (JSON arrays of their bodies) and the calls in none, with why. */
  pack(calls: Call[], nowMs?: number): { batches: WebhookBatch[]; skipped: [number, DeliveryOutcome][] };
  /**
   * Delivers calls several to a POST, each batch signed as one body and retried whole: one result per call, in
   * order. Rejects with a DeliveryError at the first batch that gives up (the batches before it were delivered).
   */
  deliverBatch(calls: Call[], options?: { fetch?: typeof fetch }): Promise<DeliveryResult[]>;
}

/** Several calls in one POST (`Webhooks.pack`). */
export interface WebhookBatch {
  /** `Idempotency-Key` and `webhook-id`: the same for the same calls. */
  id: string;
  /** The JSON array of the calls' bodies. */
  body: string;
  /** The indexes of its calls in the list packed. */
  members: number[];
}

/** What a host's HTTP client saw: a status (with the raw Retry-After), or an error kind. */
export type Report =
  | { status: number; retryAfter?: string }
  | { error: 'timeout' | 'connection' | 'tls' | 'token'; message?: string };

export interface DeliveryAttempt {
  endpoint: number;
  /** Pass it back to `handleResponse`. */
  attempt: number;
  request: HttpRequest;
  deadlineMs: number;
}

/** The sans-IO delivery: `pollRequest` until undefined, send every request, `handleResponse` for each. */
export class Delivery {
  /** Seeded from crypto.getRandomValues unless `seed` is given. */
  constructor(webhooks: Webhooks, call: Call, options?: { nowMs?: number; seed?: number; timeoutMs?: number;
    retryWindowMs?: number; backoffBaseMs?: number; backoffCapMs?: number });
  pollRequest(nowMs: number): DeliveryAttempt | undefined;
  handleResponse(nowMs: number, attempt: number, report: Report): void;
  handleTimeout(nowMs: number): void;
  pollTimeout(): number | undefined;
  pollOutcome(): DeliveryOutcome | undefined;
  readonly outcome: DeliveryOutcome | undefined;
  readonly errorMessage: string | undefined;
  readonly log: AttemptRecord[];
  readonly body: string;
  readonly messageId: string | undefined;
  readonly mode: 'parallel' | 'failover';
  readonly done: boolean;
  toJSON(): string;
  /** Restores a saved state for the same settings; requests in flight when it was saved are sent again. */
  static fromJSON(text: string, webhooks: Webhooks): Delivery;
  free(): void;
}

/** A prekeyed HMAC-SHA1: the fastest way to sign many bodies with one secret. Never shows the secret. */
export class Signer {
  constructor(secret: Secret);
  /** Lowercase hex HMAC-SHA1 of the body's UTF-8 bytes (same as `sign(secret, body)`). */
  signString(body: string): string;
  /** Lowercase hex HMAC-SHA1 of the bytes. */
  signBytes(body: Uint8Array): string;
  /** Releases the key's wasm memory now rather than at garbage collection. */
  free(): void;
}

export type BatcherEvent =
  | { kind: 'delivered'; batchId: number; messageIds: string[] }
  | { kind: 'retrying'; batchId: number; attempt: number; retryAtMs: number; reason: string }
  | { kind: 'failed'; batchId: number | null; code: 'rejected' | 'retries_exhausted' | 'shutdown'; reason: string; messages: { messageId: string; json: string }[] };

/** The batching client's sans-IO state machine. Seeded from crypto.getRandomValues unless `seed` is given. */
export class Batcher {
  constructor(options: { writeKey: string; endpoint?: string; batchPath?: string; flushAt?: number; flushAfterMs?: number;
    maxQueue?: number; maxAttempts?: number; maxRetryMs?: number; requestTimeoutMs?: number; maxInFlight?: number;
    backoffBaseMs?: number; backoffCapMs?: number; libraryName?: string; libraryVersion?: string; seed?: number }, nowMs?: number);
  /** Queues a call (an object or its JSON text); `random` (16 bytes, for the messageId) defaults to crypto's. */
  handleCall(nowMs: number, call: Call, random?: Uint8Array): string;
  /** The message `handleCall` would queue, checked and completed (messageId, timestamp, context.library), not queued. */
  prepare(nowMs: number, call: Call, random?: Uint8Array): PreparedMessage;
  /** Queues a message from `prepare` (it is spent); throws `queue_full` or `closed` as `handleCall` does. */
  handleMessage(message: PreparedMessage): void;
  flush(nowMs: number): void;
  shutdown(): void;
  pollRequest(nowMs: number): { batchId: number; attempt: number; messageCount: number; request: HttpRequest; deadlineMs: number } | undefined;
  handleResponse(nowMs: number, batchId: number, report: Report): void;
  handleTimeout(nowMs: number): void;
  pollTimeout(): number | undefined;
  /** True once after `handleCall`, `handleMessage` or `flush` moved `pollTimeout()` earlier: a sender asleep until the time it last read must wake now. Reading it resets it. */
  pollWake(): boolean;
  pollEvent(): BatcherEvent | undefined;
  readonly queued: number;
  readonly inBatches: number;
  readonly idle: boolean;
  free(): void;
}

/** A message `Batcher.prepare` made: its id and its JSON as it will be sent. */
export interface PreparedMessage {
  readonly messageId: string;
  readonly json: string;
  free(): void;
}

type Fields = Omit<CallObject, 'type'>;

/** Called once per call: `error` is undefined when the message was delivered; `message` is the message as sent. */
export type CallCallback = (error: CallpostError | undefined, message: Record<string, Json>) => void;

export interface ClientOptions {
  writeKey: string;
  /** Base URL; batches go to `${endpoint}${batchPath}`. Default: Segment's API. */
  endpoint?: string;
  /** Path of the batch upload under `endpoint`. @default '/v1/batch' */
  batchPath?: string;
  /** @default DEFAULTS.flushAt */
  flushAt?: number;
  /** Milliseconds. @default DEFAULTS.flushAfterMs */
  flushAfter?: number;
  /** @default DEFAULTS.maxQueue */
  maxQueue?: number;
  /** @default DEFAULTS.maxAttempts */
  maxAttempts?: number;
  /** @default DEFAULTS.maxRetryMs */
  maxRetryMs?: number;
  /** @default DEFAULTS.requestTimeoutMs */
  timeoutMs?: number;
  /** @default DEFAULTS.batchBackoffBaseMs */
  backoffBaseMs?: number;
  /** @default DEFAULTS.batchBackoffCapMs */
  backoffCapMs?: number;
  /** Receives messages that will not be delivered, with the reason. */
  onError?: (error: CallpostError, messages: Record<string, Json>[]) => void;
  /** Checks and completes each call (same errors, same ids), sends nothing, and calls its callback as delivered. */
  disable?: boolean;
  fetch?: typeof fetch;
}

export class Client {
  constructor(options: ClientOptions);
  onError?: ClientOptions['onError'];
  /** Each returns the messageId; `callback`, if given, is called once the message is delivered or has failed. */
  identify(fields: Fields, callback?: CallCallback): string;
  track(fields: Fields & { event: string }, callback?: CallCallback): string;
  page(fields: Fields, callback?: CallCallback): string;
  screen(fields: Fields, callback?: CallCallback): string;
  group(fields: Fields & { groupId: string | number | bigint }, callback?: CallCallback): string;
  alias(fields: Fields & { previousId: string | number | bigint; userId: string | number | bigint }, callback?: CallCallback): string;
  /** Settles when everything queued is delivered or reported. */
  flush(): Promise<void>;
  /** Flushes (up to timeoutMs, by default DEFAULTS.shutdownTimeoutMs), then reports the rest to onError. */
  close(options?: { timeoutMs?: number }): Promise<void>;
}

export interface Api {
  stringify: typeof stringify; sign: typeof sign; verify: typeof verify; verifyParsed: typeof verifyParsed;
  verifyRequest: typeof verifyRequest; traitName: typeof traitName; parseTimestamp: typeof parseTimestamp;
  receive: typeof receive; Receiver: typeof Receiver; SeenIds: typeof SeenIds;
  webhookHandler: typeof webhookHandler; nodeMiddleware: typeof nodeMiddleware; refusal: typeof refusal;
  signStandard: typeof signStandard; verifyStandard: typeof verifyStandard; STANDARD_TOLERANCE_MS: number;
  Webhooks: typeof Webhooks; Client: typeof Client; Signer: typeof Signer; Delivery: typeof Delivery; Batcher: typeof Batcher;
  DEFAULTS: Defaults; VERSION: string; USER_AGENT: string; MAX_MESSAGE_BYTES: number; init: typeof init;
}

/** Loads the wasm module (browsers, bundlers, edge runtimes); in Node it resolves at once. */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<Api>;
declare const api: Api;
export default api;
