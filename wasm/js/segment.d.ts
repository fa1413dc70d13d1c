// `callpost/segment`: @segment/analytics-node 3.x's `Analytics`, on
// callpost's batching Client. Moving over is one import line:
//   import { Analytics } from 'callpost/segment'; // was '@segment/analytics-node'
import type { Json } from './index.js';

export type { CallpostError, Json } from './index.js';

type JsonObject = { [key: string]: Json | undefined };
/** A `bigint`, or a `number` that is a safe integer, is sent as its exact decimal string. */
type Id = string | number | bigint;
type Timestamp = string | Date;

/** The fields every call takes. */
interface Common {
  context?: JsonObject;
  timestamp?: Timestamp;
  integrations?: { [key: string]: boolean | JsonObject | undefined };
  messageId?: Id;
}
type Identity = { userId: Id; anonymousId?: Id } | { userId?: Id; anonymousId: Id };

export type IdentifyParams = Common & Identity & { traits?: JsonObject };
export type TrackParams = Common & Identity & { event: string; properties?: JsonObject };
export type PageParams = Common & Identity & { category?: string | null; name?: string | null; properties?: JsonObject };
export type GroupParams = Common & Identity & { groupId: Id; traits?: JsonObject };
export type AliasParams = Common & { userId: Id; previousId: Id };

/** What callbacks and events carry: the message as sent, and its delivery failure, if any. */
export class Context {
  /** The message's messageId. */
  readonly id: string;
  /** The message as it was (or would have been) sent. */
  readonly event: { [key: string]: Json };
  failedDelivery(): { reason: unknown } | undefined;
  logs(): never[];
  toJSON(): { id: string; event: { [key: string]: Json }; logs: never[]; metrics: never[] };
}

/** Called once per call, when its message is delivered (`err` undefined) or has failed. */
export type Callback = (err: unknown, ctx: Context) => void;

/** analytics-node's HTTPClient: a fetch-like function, or an object with makeRequest. */
export interface HTTPClientRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds. */
  httpRequestTimeout: number;
}
export interface HTTPClient {
  makeRequest(request: HTTPClientRequest): Promise<{
    status: number;
    statusText?: string;
    headers?: Record<string, string> | { get(name: string): string | null; forEach(f: (value: string, key: string) => void): void };
  }>;
}
export type HTTPFetchFn = (url: string, init: { method: string; headers: Record<string, string>; body: string; signal: AbortSignal; redirect: 'manual' }) => Promise<Response>;

export interface AnalyticsSettings {
  writeKey: string;
  /** @default 'https://api.segment.io' */
  host?: string;
  /** Resolved against `host` as a URL. @default '/v1/batch' */
  path?: string;
  /** Messages per batch. @default SEGMENT_DEFAULTS.flushAt (15) */
  flushAt?: number;
  /** @deprecated analytics-node's older name for flushAt. */
  maxEventsInBatch?: number;
  /** Milliseconds from a batch's first message to its upload. @default SEGMENT_DEFAULTS.flushIntervalMs (10000) */
  flushInterval?: number;
  /** Retries after the first attempt. @default SEGMENT_DEFAULTS.maxRetries (10) */
  maxRetries?: number;
  /** Milliseconds. @default SEGMENT_DEFAULTS.httpRequestTimeoutMs (10000) */
  httpRequestTimeout?: number;
  /** Checks and completes each call and sends nothing; callbacks report delivery. */
  disable?: boolean;
  httpClient?: HTTPClient | HTTPFetchFn;
  /** Seconds a batch may spend retrying. @default 43200 */
  maxTotalBackoffDuration?: number;
  /** Accepted; the core's retry window bounds Retry-After waits too. */
  maxRateLimitDuration?: number;
  /** Not supported: throws `invalid_argument`. */
  oauthSettings?: never;
}

export interface HttpRequestEvent { url: string; method: string; headers: Record<string, string>; body: string }
export interface HttpResponseEvent { url: string; status: number; statusText: string; headers: Record<string, string>; body: string }

export interface AnalyticsEvents {
  error: [{ code: 'delivery_failure'; reason: unknown; ctx: Context }];
  http_request: [HttpRequestEvent];
  http_response: [HttpResponseEvent];
  drained: [];
  call_after_close: [{ [key: string]: Json }];
  identify: [Context]; track: [Context]; page: [Context]; screen: [Context]; group: [Context]; alias: [Context];
}

export class Analytics {
  constructor(settings: AnalyticsSettings);
  readonly VERSION: string;
  /** Resolved at once (callpost loads no plugins). */
  readonly ready: Promise<void>;
  identify(params: IdentifyParams, callback?: Callback): void;
  track(params: TrackParams, callback?: Callback): void;
  page(params: PageParams, callback?: Callback): void;
  screen(params: PageParams, callback?: Callback): void;
  group(params: GroupParams, callback?: Callback): void;
  alias(params: AliasParams, callback?: Callback): void;
  /** Sends everything queued; resolves when each call is delivered or reported, or after `timeout` ms. */
  flush(options?: { timeout?: number; close?: boolean }): Promise<void>;
  /** Stops taking calls and flushes; after `timeout` ms (default max(60000, flushInterval) × 1.25) the rest fails. */
  closeAndFlush(options?: { timeout?: number }): Promise<void>;
  on<E extends keyof AnalyticsEvents>(event: E, listener: (...args: AnalyticsEvents[E]) => void): this;
  once<E extends keyof AnalyticsEvents>(event: E, listener: (...args: AnalyticsEvents[E]) => void): this;
  off<E extends keyof AnalyticsEvents>(event: E, listener: (...args: AnalyticsEvents[E]) => void): this;
  emit<E extends keyof AnalyticsEvents>(event: E, ...args: AnalyticsEvents[E]): this;
  listenerCount(event: keyof AnalyticsEvents): number;
  /** Segment's plugins do not run here: throws `invalid_argument`. */
  register(...plugins: unknown[]): never;
  deregister(...names: string[]): never;
}

/** analytics-node's defaults, from the core (durations in ms). */
export interface SegmentDefaults {
  flushAt: number; flushIntervalMs: number; maxRetries: number; httpRequestTimeoutMs: number;
  maxTotalBackoffDurationMs: number; maxRateLimitDurationMs: number; closeTimeoutFloorMs: number; closeTimeoutPercent: number;
}
export declare const SEGMENT_DEFAULTS: SegmentDefaults;
export declare const VERSION: string;

export interface SegmentApi {
  Analytics: typeof Analytics; Context: typeof Context; SEGMENT_DEFAULTS: SegmentDefaults; VERSION: string; init: typeof init;
}
/** Loads the client-only wasm module (browsers, bundlers, edge runtimes); in Node it resolves at once. */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<SegmentApi>;
declare const api: SegmentApi;
export default api;
