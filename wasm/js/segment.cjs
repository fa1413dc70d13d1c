'use strict';
// Node (require('callpost/segment')): @segment/analytics-node's Analytics
// over the client-only wasm module.
const wasm = require('./client/node/callpost_wasm.js');
const { makeSegment } = require('./api.cjs');
const platform = require('./node-platform.cjs');

module.exports = makeSegment(wasm, platform);
module.exports.default = module.exports;
