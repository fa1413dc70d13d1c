// Builds browser/ for production as a user's project would, with the
// bundler's defaults: `node build-browser.mjs vite|webpack|esbuild OUT`.
// Each output directory gets an index.html that loads the bundle.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [bundler, out] = process.argv.slice(2);
const root = join(import.meta.dirname, 'browser');
const page = (script) => `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head><body>${script}</body></html>`;

if (bundler === 'vite') {
  const { build } = await import('vite');
  await build({ root, logLevel: 'warn', build: { outDir: out, emptyOutDir: true } });
} else if (bundler === 'webpack') {
  const { default: webpack } = await import('webpack');
  const stats = await new Promise((resolve, reject) => {
    webpack({ mode: 'production', context: root, entry: './app.js', output: { path: out, filename: 'app.js' } },
      (err, s) => (err ? reject(err) : resolve(s)));
  });
  if (stats.hasErrors()) throw new Error(stats.toString('errors-only'));
  // webpack's output is a classic script; the page loads it as one.
  writeFileSync(join(out, 'index.html'), page('<script src="./app.js"></script>'));
} else if (bundler === 'esbuild') {
  const { build } = await import('esbuild');
  await build({ entryPoints: [join(root, 'app-esbuild.js')], bundle: true, format: 'esm', platform: 'browser',
    outfile: join(out, 'app.js'), loader: { '.wasm': 'file' }, logLevel: 'warning' });
  writeFileSync(join(out, 'index.html'), page('<script type="module" src="./app.js"></script>'));
} else {
  throw new Error(`unknown bundler ${bundler}`);
}
