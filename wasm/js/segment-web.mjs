// Browsers, bundlers and edge runtimes: Analytics over the client-only wasm
// module.
//   const { Analytics } = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes.
import initWasm, * as wasm from './client/web/callpost_wasm.js';
import { makeSegment, webInit } from './api.mjs';

export const init = webInit(initWasm, wasm, makeSegment);
export default init;
