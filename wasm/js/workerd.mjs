// Cloudflare Workers (the `workerd` condition): the full API, ready at import.
// The .wasm is imported statically, as Workers compile it at upload
// (wrangler bundles a .wasm import as a CompiledWasm module); Workers may
// not compile wasm from bytes at run time, which is why init() from URL or
// bytes cannot work there.
import module from './web/callpost_wasm_bg.wasm';
import * as wasm from './web/callpost_wasm.js';
import { makeApi } from './api.mjs';

wasm.initSync({ module });
const api = makeApi(wasm, {});

export const {
  stringify, sign, verify, verifyParsed, verifyRequest, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
  traitName, parseTimestamp, Webhooks, Client, Signer, Delivery, Batcher, DEFAULTS, VERSION, USER_AGENT, MAX_MESSAGE_BYTES, init,
} = api;
export default api;
