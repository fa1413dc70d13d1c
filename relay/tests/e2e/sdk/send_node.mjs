// @segment/analytics-node, unmodified, sending every call kind to the relay.
//   node send_node.mjs <host> <writeKey> <n per kind> <timestamp offset ms>
// Each call carries a marker the test looks for: "node-<kind>-<i>". Its
// timestamp is the sender's clock minus the offset (an event from the past).
import { Analytics } from '@segment/analytics-node';

const [host, writeKey, n, offset] = process.argv.slice(2);
const analytics = new Analytics({ writeKey, host, path: '/v1/batch', flushAt: 20, flushInterval: 200, maxRetries: 10 });
analytics.on('error', (e) => console.error('analytics error', e && e.code, e && e.reason && e.reason.message));
const ts = () => new Date(Date.now() - Number(offset));
for (let i = 0; i < Number(n); i++) {
  const userId = `node-user-${i}`;
  analytics.identify({ userId, traits: { seq: `node-identify-${i}`, name: 'Ada Lovelace', email: 'ada@example.com' }, timestamp: ts() });
  analytics.track({ userId, event: 'Order Completed', properties: { seq: `node-track-${i}`, total: 25.5, products: [{ sku: 'A1', price: 12.5 }] }, timestamp: ts() });
  analytics.page({ userId, category: 'Docs', name: 'Home', properties: { seq: `node-page-${i}`, path: '/' }, timestamp: ts() });
  analytics.screen({ userId, name: `node-screen-${i}`, properties: { seq: `node-screen-${i}` }, timestamp: ts() });
  analytics.group({ userId, groupId: `g-${i}`, traits: { seq: `node-group-${i}`, name: 'Initech' }, timestamp: ts() });
  analytics.alias({ userId: `node-alias-${i}`, previousId: `node-prev-${i}`, timestamp: ts() });
}
await analytics.closeAndFlush({ timeout: 120_000 });
console.log('sent');
