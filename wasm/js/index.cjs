'use strict';
// Node (require): the wasm module loads synchronously; no init step.
const wasm = require('./node/callpost_wasm.js');
const { makeApi } = require('./api.cjs');
const { hmacSha1 } = require('./node-hmac.cjs');

const clients = new Set();
let hooked = false;

module.exports = makeApi(wasm, {
  hmacSha1,
  // Flush every client when the event loop empties, so a script that never
  // calls close() still sends (or reports) what it queued.
  onExit(client) {
    clients.add(client);
    if (hooked) return;
    hooked = true;
    process.on('beforeExit', () => {
      const open = [...clients].filter((c) => !c._closed);
      clients.clear();
      for (const c of open) c.close();
    });
  },
});
