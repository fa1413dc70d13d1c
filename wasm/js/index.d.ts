// Hand-written rather than generated (tsify): the public API is the wrapper
// layer in api.mjs (fetch loops, the Client), not the raw wasm exports, and
// its option objects are plain JS shapes.

/** A JSON value as JSON.stringify accepts it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined };

/** A Segment-spec call: `type` plus Segment's camelCase fields, or its JSON text. */
export interface CallObject {
  type: 'identify' | 'track' | 'page' | 'screen' | 'group' | 'alias' | 'delete';
  userId?: string | number;
  anonymousId?: string | number;
  event?: string;
  name?: string;
  category?: string;
  properties?: { [key: string]: Json | undefined };
  traits?: { [key: string]: Json | undefined };
  context?: { [key: string]: Json | undefined };
  integrations?: { [key: string]: Json | undefined };
  groupId?: string | number;
  previousId?: string | number;
  /** ISO 8601 with an offset, or a Date. */
  timestamp?: string | Date;
  messageId?: string;
}
export type Call = CallObject | string | Uint8Array;

/** Every error thrown by callpost: `.code` is the core's stable code (same in Rust and Python). */
export interface CallpostError extends Error {
  name: 'InvalidCallError' | 'JSONValueError' | 'NotJSONError' | 'SettingsError' | 'SignatureError' | 'ConfigError'
    | 'MessageTooLargeError' | 'QueueFullError' | 'ClosedError' | 'DeliveryError' | 'CallpostError' | 'TypeError';
  code: string;
}

export interface DeliveryError extends CallpostError {
  name: 'DeliveryError';
  /** 'all_endpoints_rejected' | 'window_exhausted' */
  code: string;
  outcome: DeliveryOutcome;
  log: AttemptRecord[];
}

export interface HttpRequest {
  method: 'POST';
  url: string;
  headers: [string, string][];
  /** UTF-8 JSON; X-Signature signs exactly these bytes. */
  body: string;
}

export type Outcome =
  | { kind: 'response'; status: number; retry_after?: string }
  | { kind: 'timeout' }
  | { kind: 'connection'; message: string }
  | { kind: 'tls'; message: string };

export interface AttemptRecord {
  attempt: number;
  endpoint: number;
  sent_at: number;
  ended_at: number;
  outcome: Outcome;
  verdict: 'success' | 'retry' | 'reject';
}

export type DeliveryOutcome =
  | { kind: 'delivered'; endpoint: number; attempt: number; at: number }
  | { kind: 'gave_up'; reason: 'window_exhausted' | 'all_endpoints_rejected'; attempts: number; last: Outcome | null }
  | { kind: 'disabled' };

export interface DeliveryResult {
  /** False only when the call's integrations turned Webhooks off. */
  delivered: boolean;
  endpoint: number | null;
  attempts: number;
  log: AttemptRecord[];
}

export type Endpoint = string | { url: string; headers?: Record<string, string> };
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
export function traitName(audience: string): string;
export function parseTimestamp(text: string): number;
export const USER_AGENT: string;
export const MAX_MESSAGE_BYTES: number;

export interface WebhooksOptions {
  /** 1 to 5 endpoints, tried in order. */
  endpoints: Endpoint[];
  sharedSecret?: Secret | null;
  /** Default 5000 (the spec). */
  timeoutMs?: number;
  /** Default 4 hours (the spec). */
  retryWindowMs?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
}

/** Validated destination settings, as the sans-IO Delivery needs them. */
export interface WebhooksSettings {
  readonly urls: string[];
}

export class Webhooks {
  constructor(options: WebhooksOptions);
  readonly urls: string[];
  /** Pass to `Delivery.pollRequest` when you drive a delivery yourself. */
  readonly settings: WebhooksSettings;
  request(call: Call, endpoint?: number, nowMs?: number): HttpRequest;
  isEnabledFor(call: Call): boolean;
  /** The sans-IO delivery, to drive and persist yourself. */
  delivery(call: Call, options?: { nowMs?: number; seed?: number }): Delivery;
  /** fetch with a timeout, retries and failover; rejects with a DeliveryError when it gives up. */
  deliver(call: Call, options?: { fetch?: typeof fetch }): Promise<DeliveryResult>;
}

export class Delivery {
  pollRequest(nowMs: number, webhooks: WebhooksSettings): { endpoint: number; attempt: number; request: HttpRequest; deadlineMs: number } | undefined;
  handleResponse(nowMs: number, status?: number, retryAfter?: string, error?: 'timeout' | 'connection' | 'tls', message?: string): void;
  handleTimeout(nowMs: number): void;
  pollTimeout(): number | undefined;
  pollOutcome(): DeliveryOutcome | undefined;
  readonly log: AttemptRecord[];
  readonly body: string;
  toJSON(): string;
  static fromJSON(text: string): Delivery;
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

export class Batcher {
  constructor(options: { writeKey: string; endpoint?: string; flushAt?: number; flushAfterMs?: number; maxQueue?: number;
    maxAttempts?: number; maxRetryMs?: number; requestTimeoutMs?: number; maxInFlight?: number; backoffBaseMs?: number;
    backoffCapMs?: number; libraryName?: string; libraryVersion?: string; seed?: number }, nowMs: number);
  handleCall(nowMs: number, callJson: string | Uint8Array, random: Uint8Array): string;
  flush(nowMs: number): void;
  shutdown(): void;
  pollRequest(nowMs: number): { batchId: number; attempt: number; messageCount: number; request: HttpRequest; deadlineMs: number } | undefined;
  handleResponse(nowMs: number, batchId: number, status?: number, retryAfter?: string, error?: 'timeout' | 'connection' | 'tls', message?: string): void;
  handleTimeout(nowMs: number): void;
  pollTimeout(): number | undefined;
  pollEvent(): BatcherEvent | undefined;
  readonly queued: number;
  readonly inBatches: number;
  readonly idle: boolean;
  free(): void;
}

type Fields = Omit<CallObject, 'type'>;

export interface ClientOptions {
  writeKey: string;
  /** Base URL; batches go to `${endpoint}/v1/batch`. Default https://api.segment.io. */
  endpoint?: string;
  /** Default 20. */
  flushAt?: number;
  /** Milliseconds; default 5000. */
  flushAfter?: number;
  maxQueue?: number;
  maxAttempts?: number;
  maxRetryMs?: number;
  timeoutMs?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** Receives messages that will not be delivered, with the reason. */
  onError?: (error: CallpostError, messages: Record<string, Json>[]) => void;
  fetch?: typeof fetch;
}

export class Client {
  constructor(options: ClientOptions);
  onError?: ClientOptions['onError'];
  /** Each returns the messageId. */
  identify(fields: Fields): string;
  track(fields: Fields & { event: string }): string;
  page(fields: Fields): string;
  screen(fields: Fields): string;
  group(fields: Fields & { groupId: string | number }): string;
  alias(fields: Fields & { previousId: string | number; userId: string | number }): string;
  /** Settles when everything queued is delivered or reported. */
  flush(): Promise<void>;
  /** Flushes (up to timeoutMs), then reports the rest to onError. */
  close(options?: { timeoutMs?: number }): Promise<void>;
}

export interface Api {
  stringify: typeof stringify; sign: typeof sign; verify: typeof verify; verifyParsed: typeof verifyParsed;
  verifyRequest: typeof verifyRequest; traitName: typeof traitName; parseTimestamp: typeof parseTimestamp;
  Webhooks: typeof Webhooks; Client: typeof Client; Signer: typeof Signer; Delivery: typeof Delivery; Batcher: typeof Batcher;
  USER_AGENT: string; MAX_MESSAGE_BYTES: number; init: typeof init;
}

/** Loads the wasm module (browsers, bundlers, edge runtimes); in Node it resolves at once. */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<Api>;
declare const api: Api;
export default api;
