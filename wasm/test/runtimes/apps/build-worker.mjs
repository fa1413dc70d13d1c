// Bundles worker.mjs as wrangler does: esbuild with the conditions
// workerd, worker and browser, ESM output, and each imported .wasm (with or
// without `?module`: the globs of wrangler's CompiledWasm rule) left as a
// separate module, copied next to the bundle; then writes the workerd config
// that embeds both.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

const [out, port] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const wasmModules = new Set();
await build({
  entryPoints: [join(dirname(new URL(import.meta.url).pathname), 'worker.mjs')],
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  conditions: ['workerd', 'worker', 'browser'],
  outfile: join(out, 'worker.js'),
  logLevel: 'warning',
  plugins: [{
    name: 'wasm-modules',
    setup(b) {
      b.onResolve({ filter: /\.wasm(\?module)?$/ }, (args) => {
        const file = resolve(args.resolveDir, args.path.replace(/\?module$/, ''));
        const name = basename(file);
        copyFileSync(file, join(out, name));
        wasmModules.add(name);
        return { path: `./${name}`, external: true };
      });
    },
  }],
});
const modules = [`(name = "worker.js", esModule = embed "worker.js")`,
  ...[...wasmModules].map((n) => `(name = "${n}", wasm = embed "${n}")`)];
writeFileSync(join(out, 'config.capnp'), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .w)],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const w :Workerd.Worker = (
  modules = [${modules.join(', ')}],
  compatibilityDate = "2025-09-01",
);
`);
console.log([...wasmModules].join(','));
