// Workers and edge runtimes (the `workerd` and `edge-light` conditions): the
// client API, ready at import (see workerd.mjs for why the .wasm is imported
// statically).
import module from './client/web/callpost_wasm_bg.wasm?module';
import * as wasm from './client/web/callpost_wasm.js';
import { makeClient, staticInit } from './api.mjs';

const api = staticInit(wasm, module, makeClient);

export const {
  Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES, init,
} = api;
export default api;
