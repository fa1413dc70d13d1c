// The host side of the sans-IO loops, for webhooks.mjs and client.mjs:
// OS randomness (messageIds, jitter seeds), timers, one request over fetch
// (send), and the one executor (run) of the loops they write as generators
// (deliverySteps, senderSteps), which poll the core and say what to do.
// No retry, batching or round rule lives here: those are the core's.

function randomBytes(n) {
  return globalThis.crypto.getRandomValues(new Uint8Array(n));
}

// A messageId's 16 random bytes, cut from a 4 KB draw: one
// crypto.getRandomValues call costs 3-5 us in Node 20 (webcrypto's
// argument checks), as much as the core's whole handleCall of a small
// call. The uuid package pools its random bytes the same way; every API
// built from this module draws from the one pool.
let pool = new Uint8Array(0);
let poolAt = 0;
export function randomId() {
  if (poolAt + 16 > pool.length) {
    pool = randomBytes(4096);
    poolAt = 0;
  }
  poolAt += 16;
  return pool.subarray(poolAt - 16, poolAt);
}

// A jitter seed from OS randomness: 53 bits, as many as a number holds.
export function seed() {
  const v = new DataView(randomBytes(8).buffer);
  return v.getUint32(0) * 2 ** 21 + (v.getUint32(4) >>> 11);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

// Maps a fetch failure to the core's outcome kinds.
function failureKind(e) {
  if (e && (e.name === 'TimeoutError' || e.name === 'AbortError')) return ['timeout', e.name];
  const cause = e && e.cause;
  const code = (cause && (cause.code || (cause.cause && cause.cause.code))) || '';
  if (/CERT|SSL|TLS|SELF_SIGNED|ALTNAME|UNABLE_TO_VERIFY/i.test(code)) return ['tls', `${code}: ${cause.message || ''}`];
  return ['connection', `${code || (e && e.name)}: ${(cause && cause.message) || (e && e.message) || ''}`];
}

// One request; resolves to the report the core's handleResponse takes.
export async function send(fetchFn, request, deadlineMs, extra) {
  try {
    const r = await fetchFn(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      // Redirects are a rejection (see the README); never follow one.
      redirect: 'manual',
      signal: AbortSignal.timeout(Math.max(1, deadlineMs - Date.now())),
      ...extra,
    });
    await r.arrayBuffer().catch(() => undefined);
    // A browser's manual redirect is an opaque response with status 0.
    const status = r.type === 'opaqueredirect' ? 302 : r.status;
    return { status, retryAfter: r.headers.get('retry-after') ?? undefined };
  } catch (e) {
    const [kind, message] = failureKind(e);
    return { error: kind, message };
  }
}

// Runs a loop (a generator of ['send', [[key, request, deadlineMs,
// endpoint]...]] or ['wait', ms | undefined] steps): a step's requests go
// out together. `tokens` (webhooks.mjs's Tokens) adds an OAuth 2.0
// endpoint's bearer token, or fails the attempt as a `token` outcome.
export async function run(steps, fetchFn, wait, tokens) {
  let reply;
  for (;;) {
    const { value, done } = steps.next(reply);
    if (done) return value;
    const [kind, arg] = value;
    if (kind === 'send') {
      reply = await Promise.all(arg.map(async ([key, request, deadlineMs, endpoint]) => {
        let authorization;
        if (tokens?.has(endpoint)) {
          try {
            authorization = await tokens.authorization(fetchFn, endpoint);
          } catch (e) {
            return [key, Date.now(), { error: 'token', message: String(e.message ?? e) }];
          }
          request = { ...request, headers: [...request.headers, ['Authorization', authorization]] };
        }
        const report = await send(fetchFn, request, deadlineMs);
        if (authorization !== undefined && report.status === 401) tokens.rejected(endpoint, authorization);
        return [key, Date.now(), report];
      }));
    } else {
      await wait(arg);
      reply = undefined;
    }
  }
}

// A report (what send resolves to, or a host's own) as the positional
// arguments of the core's handleResponse.
export const reportArgs = ({ status, retryAfter, error: kind, message } = {}) => [status, retryAfter, kind, message];
