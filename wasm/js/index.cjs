'use strict';
// Node (require): the wasm module loads synchronously; no init step.
const wasm = require('./node/callpost_wasm.js');
const { makeApi } = require('./api.cjs');
const platform = require('./node-platform.cjs');

module.exports = makeApi(wasm, platform);
