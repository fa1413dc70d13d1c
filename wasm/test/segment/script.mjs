// A script written for @segment/analytics-node 3.x. segment.test.mjs runs
// it as it is and with its import line changed to 'callpost/segment', each
// against a local ingest server (INGEST_URL), and compares what arrives.
import { Analytics } from '@segment/analytics-node';

const analytics = new Analytics({ writeKey: 'wk_script', host: process.env.INGEST_URL, flushInterval: 60_000 });
const sent = (method, params) => new Promise((resolve, reject) =>
  analytics[method](params, (err) => (err ? reject(err) : resolve())));

const order = {
  orderId: 'o-1001',
  total: 149.97,
  currency: 'EUR',
  products: [
    { productId: 'p1', sku: 'SKU-1', name: 'Café crème ☕', price: 19.99, quantity: 3, tags: ['food', 'drink'] },
    { productId: 'p2', sku: 'SKU-2', name: 'Große Tasche', price: 89.98, quantity: 1, onSale: false, coupon: null },
  ],
};

const delivered = Promise.all([
  sent('identify', {
    userId: 'user-42',
    traits: { name: 'Zoë Example', email: 'zoe@example.com', plan: 'pro', logins: 17, address: { city: 'Zürich', zip: '8001' } },
    context: { ip: '203.0.113.9', userAgent: 'script/1.0', locale: 'de-CH' },
  }),
  sent('identify', { anonymousId: 'anon-7', traits: { referrer: 'ad' } }),
  sent('track', { userId: 'user-42', event: 'Order Completed', properties: order, integrations: { All: false, Mixpanel: true } }),
  sent('track', { anonymousId: 'anon-7', event: 'Viewed Pricing', timestamp: new Date('2026-11-20T10:00:00.250Z') }),
  sent('track', { userId: 'user-42', event: 'Emoji 🎉', properties: { nested: { deep: { list: [1, 2.5, 'x', true, null] } } }, messageId: 'script-msg-1' }),
  sent('page', { userId: 'user-42', category: 'Docs', name: 'Node', properties: { path: '/docs/node', title: 'Node' } }),
  sent('page', { anonymousId: 'anon-7', name: 'Home' }),
  sent('screen', { userId: 'user-42', name: 'Checkout', category: 'Shop', properties: { step: 2 } }),
  sent('group', { userId: 'user-42', groupId: 'acme', traits: { name: 'Acme Inc', employees: 250 } }),
  sent('alias', { userId: 'user-42', previousId: 'anon-7' }),
  sent('track', { userId: 'user-42', event: 'Context Heavy', context: { app: { name: 'shop', version: '2.1.0' }, device: { type: 'server' } } }),
]);
await analytics.closeAndFlush();
await delivered;
