// Standard Webhooks signatures: signStandard and verifyStandard, over the
// core's (standard.rs). The host's part is the clock and the headers'
// shape; every rule (the tolerance, the secrets' form, what matches) is
// the core's.

// `now`: a Date, milliseconds since the epoch, or undefined for the clock.
export function nowOf(now) {
  if (now === undefined || now === null) return Date.now();
  return now instanceof Date ? now.getTime() : now;
}

export function makeStandard(wasm, { error, headerLists }) {
  const STANDARD_TOLERANCE_MS = wasm.standardToleranceMs();
  const toleranceOf = (options) => (options && options.toleranceMs !== undefined ? options.toleranceMs : STANDARD_TOLERANCE_MS);

  // The three headers for `body` sent at `now` (default: the clock), one
  // signature per secret, as an object to spread into a request's headers.
  function signStandard(msgId, body, secrets, now) {
    if (typeof msgId !== 'string') throw error('invalid_argument', 'msgId must be a string');
    const [id, timestamp, signature] = wasm.signStandard(msgId, body, secrets, nowOf(now));
    return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
  }

  // {id, timestamp} of a request whose headers verify against its raw body;
  // throws a SignatureError otherwise (timestamp_too_old, ...).
  function verifyStandard(body, headers, secrets, options) {
    const [names, values] = headerLists(headers);
    const now = nowOf(options && options.now);
    const [id, timestamp] = wasm.verifyStandard(body, names.join('\n'), values.join('\n'), secrets, now, toleranceOf(options));
    return { id, timestamp };
  }

  return { signStandard, verifyStandard, STANDARD_TOLERANCE_MS, toleranceOf };
}
