// A Cloudflare Worker: bundled as wrangler does (esbuild, conditions
// workerd/worker/browser, the .wasm kept as a module), run in workerd.
import handle from './web.mjs';

export default { fetch: handle };
