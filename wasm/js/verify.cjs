'use strict';
// Node (require('callpost/verify')): sign, verify, verifyRequest and Signer
// only, over the verify-only wasm module (about a tenth of the full one).
const wasm = require('./verify/node/callpost_wasm.js');
const { makeSigning } = require('./api.cjs');
const { hmacSha1 } = require('./node-hmac.cjs');

module.exports = makeSigning(wasm, { hmacSha1 }).api;
