// Cloudflare Workers (the `workerd` condition): Analytics, ready at import
// (see client-workerd.mjs for why the .wasm is imported statically).
import module from './client/web/callpost_wasm_bg.wasm';
import * as wasm from './client/web/callpost_wasm.js';
import { makeSegment } from './api.mjs';

wasm.initSync({ module });
const api = makeSegment(wasm, {});

export const { Analytics, Context, SEGMENT_DEFAULTS, VERSION, init } = api;
export default api;
