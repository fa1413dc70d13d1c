// Browsers and bundlers (the `browser` and `default` conditions): the
// module exports `init` alone, which loads the wasm module once and
// resolves to the API:
//   const { ... } = await init();
// `init(module)` also takes a WebAssembly.Module, the .wasm bytes or its
// URL (the .wasm is exported as a subpath, see the README).
import type { Api } from './index.js';

export type * from './index.js';

export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<Api>;
export default init;
