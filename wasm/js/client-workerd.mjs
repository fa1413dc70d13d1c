// Cloudflare Workers (the `workerd` condition): the client API, ready at import.
// The .wasm is imported statically, as Workers compile it at upload
// (wrangler bundles a .wasm import as a CompiledWasm module); Workers may
// not compile wasm from bytes at run time, which is why init() from URL or
// bytes cannot work there.
import module from './client/web/callpost_wasm_bg.wasm';
import * as wasm from './client/web/callpost_wasm.js';
import { makeClient } from './api.mjs';

wasm.initSync({ module });
const api = makeClient(wasm, {});

export const {
  Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES, init,
} = api;
export default api;
