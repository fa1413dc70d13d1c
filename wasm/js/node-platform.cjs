'use strict';
// What Node gives the JS API (the `platform` of the factories in api.cjs,
// from js/src) that browsers do not; shared by the Node entries.
const crypto = require('node:crypto');

const clients = new Set();
let hooked = false;

module.exports = {
  // Node's HMAC-SHA1 takes large bodies (SHA-NI; see NATIVE_HMAC_FROM in makeSigning).
  hmacSha1: (secret, body) => crypto.createHmac('sha1', secret).update(body).digest('hex'),
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
};
