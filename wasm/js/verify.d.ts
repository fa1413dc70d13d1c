// `callpost/verify`: what a webhook receiver needs, over a wasm module about
// a seventh the size of the full package's. The functions are the main
// entry's; see index.d.ts. These are the Node, Deno, Bun and Workers
// (workerd) types; browsers and bundlers get verify-web.d.ts (init only).
import type {
  sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
  signStandard, verifyStandard,
} from './index.js';

export type {
  Secret, CallpostError, RawBody, RequestHeaders, ReceiveOptions, ReceiverOptions, SeenFunction, SeenHook, Webhook,
  StandardHeaders, Now,
} from './index.js';
export {
  sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
  signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
} from './index.js';

export interface VerifyApi {
  sign: typeof sign; verify: typeof verify; verifyRequest: typeof verifyRequest; verifyParsed: typeof verifyParsed;
  receive: typeof receive; Receiver: typeof Receiver; SeenIds: typeof SeenIds;
  webhookHandler: typeof webhookHandler; nodeMiddleware: typeof nodeMiddleware; refusal: typeof refusal; Signer: typeof Signer;
  signStandard: typeof signStandard; verifyStandard: typeof verifyStandard; STANDARD_TOLERANCE_MS: number;
  init: typeof init;
}

/** Resolves at once to the API (already loaded in these runtimes). */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<VerifyApi>;
declare const api: VerifyApi;
export default api;
