// Browsers, bundlers and edge runtimes, for an app that sends calls: the
// batching Client over the client-only wasm module.
//   const { Client } = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes.
import initWasm, * as wasm from './client/web/callpost_wasm.js';
import { makeClient } from './api.mjs';

let api;

export async function init(input) {
  if (!api) {
    await initWasm(input === undefined ? undefined : { module_or_path: input });
    api = makeClient(wasm, {});
  }
  return api;
}

export default init;
