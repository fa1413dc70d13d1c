// The JavaScript API over the wasm core: the package's public surface. The
// wasm exports are its private half. Values cross into wasm as JSON text or
// UTF-8 bytes (JSON.stringify runs natively). The I/O loops are written once,
// as generators that poll the core and say what to do (deliverySteps,
// senderSteps), and run by one executor (run): a round's requests go out
// together with Promise.all over fetch. Retry, batching and round rules,
// limits and defaults live in the Rust core, shared with the Python package.
//
// Each entry of the package (wasm/js/*.cjs, *.mjs) loads its wasm module and
// builds its API with one factory, `make*(wasm, platform)`; `platform` is
// what Node adds (node-platform.cjs: a native HMAC for large bodies, an exit
// hook that flushes clients), {} elsewhere.
//
//   makeApi      full.mjs      `callpost`: everything, over the full module
//   makeSigning  signing.mjs   `callpost/verify`: sign, verify, Signer and
//                receive.mjs   the receivers, over the verify-only module
//   makeClient   client.mjs    `callpost/client`: Client and Batcher, over
//                              the client-only module
//   makeSegment  segment.mjs   `callpost/segment`: analytics-node's Analytics
//                              on the Client, over the client-only module
//   webInit      init.mjs      the browser entries' init()
//   staticInit   init.mjs      the Workers and edge entries' start
//
// What they share: errors.mjs (errors by the core's code), json.mjs (JS
// values into JSON text and call bytes), host.mjs (fetch, timers,
// randomness and the loop executor), webhooks.mjs (Webhooks and Delivery,
// in the full API only).
//
// build.sh bundles this file and its imports with esbuild into pkg/api.mjs
// (ES module: the browser, Workers and edge entries) and pkg/api.cjs
// (CommonJS: the Node entries); the package ships no other copy.
export { makeApi } from './full.mjs';
export { makeSigning } from './signing.mjs';
export { makeClient } from './client.mjs';
export { makeSegment } from './segment.mjs';
export { staticInit, webInit } from './init.mjs';
