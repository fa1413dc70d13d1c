// Browsers, bundlers and edge runtimes, for a webhook receiver: sign,
// verify, verifyRequest and Signer over the verify-only wasm module.
//   const { verifyRequest } = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes.
import initWasm, * as wasm from './verify/web/callpost_wasm.js';
import { makeSigning } from './api.mjs';

let api;

export async function init(input) {
  if (!api) {
    await initWasm(input === undefined ? undefined : { module_or_path: input });
    api = makeSigning(wasm, {}).api;
  }
  return api;
}

export default init;
