#!/usr/bin/env bash
# `npm run build`: turns the wasm crate into the npm package in wasm/pkg.
# cargo (release, wasm32) → wasm-bindgen (nodejs and web targets) → npm's
# wasm-opt (binaryen@132; Debian's breaks wasm-bindgen output, TOOLCHAIN.md).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)

cargo build --locked --profile wasm-release -p callpost-wasm --target wasm32-unknown-unknown
wasm="$root/target/wasm32-unknown-unknown/wasm-release/callpost_wasm.wasm"

rm -rf pkg && mkdir -p pkg
wasm-bindgen --target nodejs --out-dir pkg/node "$wasm"
wasm-bindgen --target web --out-dir pkg/web "$wasm"
for t in node web; do
  node_modules/.bin/wasm-opt -O3 "pkg/$t/callpost_wasm_bg.wasm" -o "pkg/$t/callpost_wasm_bg.wasm"
  rm -f pkg/$t/.gitignore pkg/$t/package.json
done

cp js/index.cjs js/index.mjs js/web.mjs js/api.mjs js/index.d.ts js/package.json pkg/
cp README.md pkg/README.md
# The CommonJS copy of the API: api.mjs has exactly one export and no imports.
grep -c '^export function makeApi' js/api.mjs | grep -qx 1
sed 's/^export function makeApi/function makeApi/' js/api.mjs > pkg/api.cjs
printf "\nmodule.exports = { makeApi };\n" >> pkg/api.cjs

raw=$(wc -c < pkg/web/callpost_wasm_bg.wasm)
gz=$(gzip -9 -c pkg/web/callpost_wasm_bg.wasm | wc -c)
echo "built wasm/pkg: callpost_wasm_bg.wasm is $raw bytes, $gz gzipped"
