// Browsers, bundlers and edge runtimes: one line before use,
//   const callpost = await init();
// `init(module)` also takes a WebAssembly.Module or the .wasm bytes, for
// runtimes that bundle the module themselves (Workers, Deno).
import initWasm, * as wasm from './web/callpost_wasm.js';
import { makeApi } from './api.mjs';

let api;

export async function init(input) {
  if (!api) {
    await initWasm(input === undefined ? undefined : { module_or_path: input });
    api = makeApi(wasm, {});
  }
  return api;
}

export default init;
