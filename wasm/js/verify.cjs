'use strict';
// Node (require('callpost/verify')): sign, verify, verifyRequest and Signer
// only, over the verify-only wasm module (about a seventh of the full one).
const wasm = require('./verify/node/callpost_wasm.js');
const { makeSigning } = require('./api.cjs');
const platform = require('./node-platform.cjs');

module.exports = makeSigning(wasm, platform).api;
// `import api from 'callpost'` through CommonJS interop, as the types declare.
module.exports.default = module.exports;
