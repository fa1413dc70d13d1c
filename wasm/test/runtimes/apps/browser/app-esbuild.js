// esbuild leaves `new URL(..., import.meta.url)` alone, so nothing copies the
// .wasm for init(): the app imports it (`loader: { '.wasm': 'file' }`) and
// passes the URL.
import verifyWasm from 'callpost/verify/wasm';
import clientWasm from 'callpost/client/wasm';
import { main, report } from './main.js';

report(main(verifyWasm, clientWasm));
