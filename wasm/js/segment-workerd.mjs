// Workers and edge runtimes (the `workerd` and `edge-light` conditions):
// Analytics, ready at import (see workerd.mjs for why the .wasm is imported
// statically).
import module from './client/web/callpost_wasm_bg.wasm?module';
import * as wasm from './client/web/callpost_wasm.js';
import { makeSegment, staticInit } from './api.mjs';

const api = staticInit(wasm, module, makeSegment);

export const { Analytics, Context, SEGMENT_DEFAULTS, VERSION, init } = api;
export default api;
