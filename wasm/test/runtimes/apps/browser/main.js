// A page's script as a user writes it for a bundler. The browser entries
// load their .wasm on init(): Vite and webpack emit it beside the bundle and
// init() finds it there (app.js); with esbuild, the app imports the .wasm
// subpaths with the file loader and passes their URLs (app-esbuild.js).
import { init as initVerify } from 'callpost/verify';
import { init as initClient } from 'callpost/client';

const SECRET = 'whsec-runtimes';

const call = (messageId) => ({ type: 'track', userId: 'u1', event: 'Order Completed', messageId,
  properties: { products: [{ sku: 'A-1', price: 9.99, name: 'Café ☕' }] } });

export async function main(verifyWasm, clientWasm) {
  const { sign, receive, Receiver, webhookHandler } = await initVerify(verifyWasm);
  const body = JSON.stringify(call('m-1'));
  const signature = sign(SECRET, body);
  const received = receive(body, { 'X-Signature': signature }, SECRET);

  // The receiver scenario of the server runtimes, through the same
  // web-standard handler, given Requests made in the page.
  const handle = webhookHandler(new Receiver(SECRET), (hook) => Response.json({ processed: hook.ids }));
  const post = async (text, headers) => {
    const res = await handle(new Request('https://receiver.example/hook', { method: 'POST', body: text, headers }));
    const answer = await res.json();
    return [res.status, answer.error ?? answer];
  };
  const batch = JSON.stringify([call('m-3'), call('m-4'), call('m-1')]);
  const legacy = [call('m-5'), call('m-6')];
  const scenario = {
    valid: await post(body, { 'X-Signature': signature }),
    duplicate: await post(body, { 'X-Signature': signature }),
    tampered: await post(body.replace('9.99', '0.01'), { 'X-Signature': signature }),
    missing: await post(JSON.stringify(call('m-2')), {}),
    batch: await post(batch, { 'X-Segment-Signature': sign(SECRET, batch) }),
    firstEventOnly: await post(JSON.stringify(legacy, null, 2), { 'X-Signature': sign(SECRET, JSON.stringify(legacy[0])) }),
  };

  const { Client } = await initClient(clientWasm);
  // The page's own origin, or the test's ingest server (?endpoint=).
  const endpoint = new URLSearchParams(location.search).get('endpoint') ?? location.origin;
  const client = new Client({ writeKey: 'wk_bundle', endpoint, flushAt: 2, flushAfter: 60_000 });
  const ids = [client.track({ userId: 'u1', event: 'Viewed' }), client.identify({ userId: 'u1', traits: { plan: 'pro' } })];
  await client.flush();
  return { body, signature, event: received.event, product: received.properties.products[0].name, scenario, ids };
}

export function report(run) {
  run.then((r) => { window.__result = r; }, (e) => { window.__result = { error: String((e && e.stack) || e) }; });
}
