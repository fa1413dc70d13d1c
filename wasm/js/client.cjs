'use strict';
// Node (require('callpost/client')): the batching Client (and Batcher,
// stringify, parseTimestamp) over the client-only wasm module, which has no
// webhooks and no signing.
const wasm = require('./client/node/callpost_wasm.js');
const { makeClient } = require('./api.cjs');
const platform = require('./node-platform.cjs');

module.exports = makeClient(wasm, platform);
// `import api from 'callpost'` through CommonJS interop, as the types declare.
module.exports.default = module.exports;
