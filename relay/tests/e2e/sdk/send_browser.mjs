// analytics.js (@segment/analytics-next, its unmodified UMD build) in
// headless Chromium, posting cross-origin to the relay: the page is served
// from one origin, the relay is another.
//   node send_browser.mjs <relay url> <writeKey> <n per kind> <timestamp offset ms> [batching]
// Markers as in send_node.mjs, with "browser-"; "batching" sends through
// analytics.js's batching delivery (/v1/b) instead of one request per call.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const [relayUrl, writeKey, n, offset, mode] = process.argv.slice(2);
const umd = readFileSync(require.resolve('@segment/analytics-next/dist/umd/index.js'));
const PAGE = '<!doctype html><meta charset="utf-8"><title>shop</title><script src="/analytics.js"></script>';

const server = http.createServer((req, res) => {
  if (req.url === '/') return res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
  if (req.url === '/analytics.js') return res.writeHead(200, { 'content-type': 'text/javascript' }).end(umd);
  res.writeHead(404).end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let code = 0;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // Every answer from the relay, by status, and the calls it acknowledged:
  // analytics.js resolves a call's promise when it is queued, not sent.
  const answers = {};
  let acknowledged = 0;
  page.on('requestfinished', async (r) => {
    if (!r.url().startsWith(relayUrl) || r.method() !== 'POST') return;
    const res = await r.response();
    const status = res ? res.status() : 'none';
    answers[status] = (answers[status] || 0) + 1;
    if (status === 200) {
      const body = JSON.parse(r.postData());
      acknowledged += Array.isArray(body.batch) ? body.batch.length : 1;
    }
  });
  page.on('requestfailed', (r) => {
    if (r.url().startsWith(relayUrl)) answers.failed = (answers.failed || 0) + 1;
  });
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const apiHost = new URL(relayUrl).host + '/v1';
  const result = await page.evaluate(async ({ writeKey, apiHost, n, offset, batching }) => {
    const settings = { writeKey, cdnSettings: { integrations: { 'Segment.io': { apiKey: writeKey, apiHost, protocol: 'http',
      ...(batching ? { deliveryStrategy: { strategy: 'batching', config: { size: 20, timeout: 200 } } } : {}) } } } };
    const [analytics] = await window.AnalyticsNext.AnalyticsBrowser.load(settings, { integrations: {} });
    const ts = () => new Date(Date.now() - offset);
    const sent = [];
    for (let i = 0; i < n; i++) {
      const userId = `browser-user-${i}`;
      sent.push(analytics.identify(userId, { seq: `browser-identify-${i}` }, { timestamp: ts() }));
      sent.push(analytics.track('Order Completed', { seq: `browser-track-${i}`, total: 25.5 }, { timestamp: ts(), userId }));
      sent.push(analytics.page('Docs', 'Home', { seq: `browser-page-${i}` }, { timestamp: ts(), userId }));
      sent.push(analytics.screen('Docs', `browser-screen-${i}`, { seq: `browser-screen-${i}` }, { timestamp: ts(), userId }));
      sent.push(analytics.group(`g-${i}`, { seq: `browser-group-${i}` }, { timestamp: ts(), userId }));
      sent.push(analytics.alias(`browser-alias-${i}`, `browser-prev-${i}`, { timestamp: ts() }));
      if (i % 50 === 49) await Promise.all(sent.splice(0));
    }
    await Promise.all(sent);
    return { origin: location.origin };
  }, { writeKey, apiHost, n: Number(n), offset: Number(offset), batching: mode === 'batching' });
  // Batching mode flushes on a timer, and analytics.js builds each batch in
  // time quadratic in its length (it measures every prefix), so a flush of a
  // few hundred calls takes seconds of CPU: wait for the relay's answers.
  const deadline = Date.now() + 120_000;
  while (acknowledged < 6 * Number(n) && Date.now() < deadline) await page.waitForTimeout(100);
  if (errors.length) { console.error(errors.join('\n')); code = 1; }
  console.log('sent from', result.origin, 'relay answers', JSON.stringify(answers), 'calls acknowledged', acknowledged);
} finally {
  await browser.close();
  server.close();
}
process.exit(code);
