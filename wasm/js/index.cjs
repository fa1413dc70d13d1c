'use strict';
// Node (require): the wasm module loads synchronously; no init step.
const wasm = require('./node/callpost_wasm.js');
const { makeApi } = require('./api.cjs');
const platform = require('./node-platform.cjs');

module.exports = makeApi(wasm, platform);
// `import api from 'callpost'` through CommonJS interop, as the types declare.
module.exports.default = module.exports;
