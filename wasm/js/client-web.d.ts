// Browsers and bundlers (the `browser` and `default` conditions): the
// module exports `init` alone, which loads the wasm module once and
// resolves to the API:
//   const { ... } = await init();
// `init(module)` also takes a WebAssembly.Module, the .wasm bytes or its
// URL (the .wasm is exported as a subpath, see the README).
import type { ClientApi } from './client.js';

export type * from './client.js';

export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<ClientApi>;
export default init;
