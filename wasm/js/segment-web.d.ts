// Browsers and bundlers (the `browser` and `default` conditions): the
// module exports `init` alone, which loads the wasm module once and
// resolves to the API:
//   const { Analytics } = await init();
import type { SegmentApi } from './segment.js';

export type * from './segment.js';

export function init(module?: WebAssembly.Module | BufferSource | URL | string): Promise<SegmentApi>;
export default init;
