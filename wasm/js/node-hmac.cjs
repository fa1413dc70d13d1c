'use strict';
// Node's HMAC-SHA1, which both Node entries hand large bodies to (SHA-NI;
// see the thresholds in api.mjs).
const crypto = require('node:crypto');

exports.hmacSha1 = (secret, body) => crypto.createHmac('sha1', secret).update(body).digest('hex');
