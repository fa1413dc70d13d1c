// Cloudflare Workers (the `workerd` condition) and the Vercel / Next.js edge
// runtime (`edge-light`): the full API, ready at import. The .wasm is
// imported statically, as these runtimes compile it at deploy: wrangler and
// Next.js bundle a `.wasm?module` import as a compiled module. Neither may
// compile wasm from bytes at run time, which is why init() from a URL or
// bytes cannot work there.
import module from './web/callpost_wasm_bg.wasm?module';
import * as wasm from './web/callpost_wasm.js';
import { makeApi, staticInit } from './api.mjs';

const api = staticInit(wasm, module, makeApi);

export const {
  stringify, sign, verify, verifyParsed, verifyRequest, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
  signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
  traitName, parseTimestamp, Webhooks, Client, Signer, Delivery, Batcher, DEFAULTS, VERSION, USER_AGENT, MAX_MESSAGE_BYTES, init,
} = api;
export default api;
