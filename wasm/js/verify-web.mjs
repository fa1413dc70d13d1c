// Browsers, bundlers and edge runtimes, for a webhook receiver: sign,
// verify, verifyRequest and Signer over the verify-only wasm module.
//   const { verifyRequest } = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes.
import initWasm, * as wasm from './verify/web/callpost_wasm.js';
import { makeSigning, webInit } from './api.mjs';

export const init = webInit(initWasm, wasm, (w, p) => makeSigning(w, p).api);
export default init;
