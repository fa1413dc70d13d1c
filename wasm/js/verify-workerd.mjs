// Workers and edge runtimes (the `workerd` and `edge-light` conditions): the
// receiver API, ready at import (see workerd.mjs for why the .wasm is
// imported statically).
import module from './verify/web/callpost_wasm_bg.wasm?module';
import * as wasm from './verify/web/callpost_wasm.js';
import { makeSigning, staticInit } from './api.mjs';

const api = staticInit(wasm, module, (w, p) => makeSigning(w, p).api);

export const {
  sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
  signStandard, verifyStandard, STANDARD_TOLERANCE_MS, init,
} = api;
export default api;
