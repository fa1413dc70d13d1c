#!/usr/bin/env bash
# `npm run build`: turns the wasm crate into the npm package in wasm/pkg.
# cargo (release, wasm32) → wasm-bindgen (nodejs and web targets) → npm's
# wasm-opt (binaryen@132 from npm: Debian's binaryen, wasm-opt 108, silently
# breaks wasm-bindgen 0.2.130 output, which then fails to load with
# `WebAssembly.Table.set(): Argument 1 is invalid for table`).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)

# Three modules from the one crate (features in src/lib.rs): the full one
# (the main entry), `signing` alone (`callpost/verify`) and `client` alone
# (`callpost/client`).
rm -rf pkg && mkdir -p pkg
for build in full verify client; do
  case "$build" in
    full) features=(); out=pkg ;;
    verify) features=(--no-default-features --features signing); out=pkg/verify ;;
    client) features=(--no-default-features --features client); out=pkg/client ;;
  esac
  cargo build --locked --profile wasm-release -p callpost-wasm --target wasm32-unknown-unknown "${features[@]}"
  wasm="$root/target/wasm32-unknown-unknown/wasm-release/callpost_wasm.wasm"
  wasm-bindgen --target nodejs --out-dir "$out/node" "$wasm"
  wasm-bindgen --target web --out-dir "$out/web" "$wasm"
  for t in node web; do
    node_modules/.bin/wasm-opt -O3 "$out/$t/callpost_wasm_bg.wasm" -o "$out/$t/callpost_wasm_bg.wasm"
    rm -f "$out/$t/.gitignore" "$out/$t/package.json"
  done
  # wasm-bindgen's web glue is ESM in a CommonJS package: its own
  # package.json says so to Node 20 and to bundlers (Turbopack refuses it
  # otherwise).
  echo '{ "type": "module" }' > "$out/web/package.json"
  # The Node glue reads its .wasm from __dirname, which server bundlers
  # (Next.js with Turbopack or webpack, vercel/next.js#83046) move the code
  # away from. It takes the bytes from a module beside it instead, base64,
  # as shiki's inlined wasm does; the .wasm file is not shipped for Node.
  glue="$out/node/callpost_wasm.js"
  if [ "$(grep -c '^const wasmPath = `${__dirname}/callpost_wasm_bg.wasm`;$' "$glue")" != 1 ] ||
     [ "$(grep -c "^const wasmBytes = require('fs').readFileSync(wasmPath);$" "$glue")" != 1 ]; then
    echo "$glue no longer reads its .wasm as build.sh expects (wasm-bindgen changed?)" >&2
    exit 1
  fi
  node -e 'const fs = require("fs"); const [wasm, out] = process.argv.slice(1);
    fs.writeFileSync(out, "module.exports = \"" + fs.readFileSync(wasm).toString("base64") + "\";\n");' \
    "$out/node/callpost_wasm_bg.wasm" "$out/node/callpost_wasm_bg.cjs"
  sed -i -e '/^const wasmPath = /d' \
    -e "s|^const wasmBytes = require('fs').readFileSync(wasmPath);\$|const wasmBytes = Buffer.from(require('./callpost_wasm_bg.cjs'), 'base64');|" "$glue"
  rm "$out/node/callpost_wasm_bg.wasm"
done

cp js/index.cjs js/index.mjs js/web.mjs js/index.d.ts js/node-platform.cjs \
  js/verify.cjs js/verify.mjs js/verify-web.mjs js/verify.d.ts \
  js/client.cjs js/client.mjs js/client-web.mjs js/client.d.ts js/package.json \
  js/workerd.mjs js/verify-workerd.mjs js/client-workerd.mjs js/web.d.ts js/verify-web.d.ts js/client-web.d.ts \
  js/segment.cjs js/segment.mjs js/segment-web.mjs js/segment-workerd.mjs js/segment.d.ts js/segment-web.d.ts pkg/
cp README.md pkg/README.md
# ESM types (.d.mts) for the ESM entries, so TypeScript does not read the
# CommonJS declarations for an import (attw's "masquerading as CJS").
for t in index verify client segment web verify-web client-web segment-web; do
  sed -e "s|from './index.js'|from './index.mjs'|; s|from './verify.js'|from './verify.mjs'|; s|from './client.js'|from './client.mjs'|; s|from './segment.js'|from './segment.mjs'|" "pkg/$t.d.ts" > "pkg/$t.d.mts"
done
# The API every entry builds on (js/src, ES modules; js/src/api.mjs maps
# them), bundled by esbuild into one file per module format: pkg/api.mjs
# for the browser, Workers and edge entries, pkg/api.cjs for the Node ones.
# Not minified, so that it reads in a debugger; no syntax is lowered (the
# sources run as written on Node 20 and every target runtime).
# (--platform=node marks the CommonJS exports for Node's ESM loader.)
bundle=(node_modules/.bin/esbuild js/src/api.mjs --bundle --charset=utf8 --log-level=warning
  --banner:js="// callpost's JS API, bundled by esbuild from wasm/js/src (see wasm/build.sh).")
"${bundle[@]}" --format=esm --platform=neutral --outfile=pkg/api.mjs
"${bundle[@]}" --format=cjs --platform=node --outfile=pkg/api.cjs
# The version is the Rust workspace's, the one place it is set.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
node -e 'const f = process.argv[1]; const p = JSON.parse(require("fs").readFileSync(f)); p.version = process.argv[2];
  require("fs").writeFileSync(f, JSON.stringify(p, null, 2) + "\n");' pkg/package.json "$version"

for m in web verify/web client/web; do
  raw=$(wc -c < "pkg/$m/callpost_wasm_bg.wasm")
  gz=$(gzip -9 -c "pkg/$m/callpost_wasm_bg.wasm" | wc -c)
  echo "built wasm/pkg: $m/callpost_wasm_bg.wasm is $raw bytes, $gz gzipped"
done
