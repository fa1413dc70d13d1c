// Cloudflare Workers (the `workerd` condition): the receiver API, ready at import.
// The .wasm is imported statically, as Workers compile it at upload
// (wrangler bundles a .wasm import as a CompiledWasm module); Workers may
// not compile wasm from bytes at run time, which is why init() from URL or
// bytes cannot work there.
import module from './verify/web/callpost_wasm_bg.wasm';
import * as wasm from './verify/web/callpost_wasm.js';
import { makeSigning } from './api.mjs';

wasm.initSync({ module });
const api = makeSigning(wasm, {}).api;

export const {
  sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer, init,
} = api;
export default api;
