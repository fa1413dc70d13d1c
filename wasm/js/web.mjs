// Browsers, bundlers and edge runtimes: one line before use,
//   const callpost = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes, for
// runtimes that bundle the module themselves (Workers, Deno).
import initWasm, * as wasm from './web/callpost_wasm.js';
import { makeApi, webInit } from './api.mjs';

export const init = webInit(initWasm, wasm, makeApi);
export default init;
