// `callpost/client`: what an app that sends calls needs (the batching
// Client, plus Batcher, stringify and parseTimestamp), over a wasm module
// without webhooks or signing. The classes are the main entry's; see
// index.d.ts.
import type { Client, Batcher, stringify, parseTimestamp, Defaults } from './index.js';

export type { ClientOptions, BatcherEvent, CallObject, Call, Json, CallpostError, DeliveryError, Defaults, Report, PreparedMessage, CallCallback } from './index.js';
export { Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES } from './index.js';

export interface ClientApi {
  Client: typeof Client; Batcher: typeof Batcher; stringify: typeof stringify; parseTimestamp: typeof parseTimestamp;
  DEFAULTS: Defaults; VERSION: string; MAX_MESSAGE_BYTES: number; init: typeof init;
}

/** Loads the client-only wasm module (browsers, bundlers, edge runtimes); in Node it resolves at once. */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<ClientApi>;
declare const api: ClientApi;
export default api;
