// `callpost/verify`: what a webhook receiver needs (sign, verify,
// verifyRequest, Signer), over a wasm module about a seventh the size of the
// full package's. The functions are the main entry's; see index.d.ts.
import type { sign, verify, verifyRequest, Signer } from './index.js';

export type { Secret, CallpostError } from './index.js';
export { sign, verify, verifyRequest, Signer } from './index.js';

export interface VerifyApi {
  sign: typeof sign; verify: typeof verify; verifyRequest: typeof verifyRequest; Signer: typeof Signer;
  init: typeof init;
}

/** Loads the verify-only wasm module (browsers, bundlers, edge runtimes); in Node it resolves at once. */
export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<VerifyApi>;
declare const api: VerifyApi;
export default api;
