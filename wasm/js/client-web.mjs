// Browsers, bundlers and edge runtimes, for an app that sends calls: the
// batching Client over the client-only wasm module.
//   const { Client } = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes.
import initWasm, * as wasm from './client/web/callpost_wasm.js';
import { makeClient, webInit } from './api.mjs';

export const init = webInit(initWasm, wasm, makeClient);
export default init;
