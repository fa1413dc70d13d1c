// A page's script as a user writes it for a bundler. The browser entries
// load their .wasm on init(): Vite and webpack emit it beside the bundle and
// init() finds it there (app.js); with esbuild, the app imports the .wasm
// subpaths with the file loader and passes their URLs (app-esbuild.js).
import { init as initVerify } from 'callpost/verify';
import { init as initClient } from 'callpost/client';

const SECRET = 'whsec-runtimes';

export async function main(verifyWasm, clientWasm) {
  const { sign, receive } = await initVerify(verifyWasm);
  const body = JSON.stringify({ type: 'track', userId: 'u1', event: 'Order Completed', messageId: 'm-1',
    properties: { products: [{ sku: 'A-1', price: 9.99, name: 'Café ☕' }] } });
  const signature = sign(SECRET, body);
  const call = receive(body, { 'X-Signature': signature }, SECRET);
  let refused = null;
  try {
    receive(body.replace('9.99', '0.01'), { 'X-Signature': signature }, SECRET);
  } catch (e) {
    refused = e.code;
  }
  const { Client } = await initClient(clientWasm);
  // The page's own origin, or the test's ingest server (?endpoint=).
  const endpoint = new URLSearchParams(location.search).get('endpoint') ?? location.origin;
  const client = new Client({ writeKey: 'wk_bundle', endpoint, flushAt: 2, flushAfter: 60_000 });
  const ids = [client.track({ userId: 'u1', event: 'Viewed' }), client.identify({ userId: 'u1', traits: { plan: 'pro' } })];
  await client.flush();
  return { body, signature, event: call.event, product: call.properties.products[0].name, refused, ids };
}

export function report(run) {
  run.then((r) => { window.__result = r; }, (e) => { window.__result = { error: String((e && e.stack) || e) }; });
}
