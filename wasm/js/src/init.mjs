// How an entry outside Node starts its wasm module and builds its API with
// one of the factories (makeApi, makeClient, makeSegment, makeSigning):
// staticInit for the Workers and edge entries (*workerd.mjs), which import
// their .wasm statically, and webInit, the `init()` of the browser entries
// (web.mjs, client-web.mjs, verify-web.mjs, segment-web.mjs). The Node
// entries (*.cjs) need neither: wasm-bindgen's Node glue loads its module
// synchronously. Outside Node the platform hooks are empty ({}): no native
// HMAC, no exit hook.

// The start of the entries that import the .wasm statically (workerd and
// edge-light). Next.js runs edge routes in a Node vm context (in `next build`
// and `next start`), where the imported module belongs to the outer realm:
// wasm-bindgen's `instanceof WebAssembly.Module` is false for it, and it
// would try to compile it again as bytes. The engine instantiates a module
// of any realm, so the module is given this realm's prototype.
export function staticInit(wasm, module, make) {
  if (!(module instanceof WebAssembly.Module) && Object.prototype.toString.call(module) === '[object WebAssembly.Module]') {
    Object.setPrototypeOf(module, WebAssembly.Module.prototype);
  }
  wasm.initSync({ module });
  return make(wasm, {});
}

// An entry's `init(input)` for browsers and bundlers: loads
// its wasm module once (`input`: a URL, a WebAssembly.Module or the bytes,
// else the module beside the glue), then builds the API with `make`.
export function webInit(initWasm, wasm, make) {
  let api;
  return async function init(input) {
    if (!api) {
      await initWasm(input === undefined ? undefined : { module_or_path: input });
      api = make(wasm, {});
    }
    return api;
  };
}
