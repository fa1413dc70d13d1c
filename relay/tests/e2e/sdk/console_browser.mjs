// The relay's console in headless Chromium, as an operator uses it, and
// as another site's page would try to misuse it.
//   node console_browser.mjs <relay url> <admin token> <screenshot dir> <settings JSON>
// settings: {"userId": the user whose call to find, "deadId": the dead
// letter's messageId, "source": its source, "rate": the rate limit to
// set}.
// Prints one JSON line: what it saw, for the Python test to judge. A step
// that fails ends the run with its error in the report.
import http from 'node:http';
import { chromium } from 'playwright-core';

const [relayUrl, token, outDir, settingsJson] = process.argv.slice(2);
const settings = JSON.parse(settingsJson);
const relay = new URL(relayUrl);
const report = { steps: [] };
const step = (name) => report.steps.push(name);

// Another site: its pages post forms to the relay as soon as they load.
// Reached as http://localhost:<port> (another site than 127.0.0.1) and as
// http://127.0.0.1:<port> (the same site, another origin: a SameSite
// cookie is sent from there, so only the console's header stops it).
const replayBody = [
  `{"source":"${settings.source}","status":"dead","messageIds":["${settings.deadId}","`,
  '"]}',
];
const attack = {
  // enctype=text/plain sends `name=value`: a JSON body a form can forge.
  '/replay': `<form method="post" enctype="text/plain" action="${relayUrl}/admin/replay">
    <input type="hidden" name='${replayBody[0]}' value='${replayBody[1]}'></form>`,
  '/signin': `<form method="post" action="${relayUrl}/console/session">
    <input type="hidden" name="token" value="${token}"></form>`,
};
const server = http.createServer((req, res) => {
  const form = attack[req.url];
  if (!form) return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'text/html' })
    .end(`<!doctype html><title>another site</title>${form}<script>document.forms[0].submit()</script>`);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let code = 0;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // A refused sign-in is a 401 page, which Chromium logs as a failed load:
  // only other errors (a script error, a Content-Security-Policy violation)
  // count.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });
  const ready = (name) => page.waitForSelector(`body[data-ready="${name}"]`, { timeout: 30_000 });
  // What the console asks of the admin API.
  const asked = [];
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (url.pathname.startsWith('/admin/')) asked.push({ method: r.method(), path: url.pathname + url.search, body: r.postData() ?? null });
  });
  // The admin API as the console's own script calls it: cookie and header.
  const fromPage = (path) => page.evaluate(async (p) => {
    const r = await fetch(p, { headers: { 'X-Callpost-Console': '1' } });
    return r.json();
  }, path);

  // Without a session: the sign-in form, and nothing else.
  await page.goto(`${relayUrl}/console/`);
  report.signedOut = {
    password: await page.locator('input[name=token][type=password]').count(),
    text: await page.locator('body').innerText(),
  };
  step('signed out');

  // A wrong token: refused, no cookie.
  await page.fill('input[name=token]', 'not-the-admin-token-0123456789abcdef');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  report.wrongToken = {
    error: await page.locator('.error').innerText(),
    cookies: (await context.cookies()).length,
  };
  step('wrong token');

  // Signing in.
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  await ready('overview');
  report.cookie = (await context.cookies(relayUrl)).map((c) => ({
    name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, secure: c.secure, path: c.path,
    tokenInValue: c.value.includes(token),
  }));
  step('signed in');

  // The overview's numbers against /admin/status read at the same time.
  const stats = ['pending', 'dead', 'oldest_pending_age_seconds', 'in_flight', 'delivered', 'undeliverable', 'rejected'];
  const shown = async () => Object.fromEntries(await Promise.all(stats.map(async (k) => {
    const v = await page.locator(`[data-stat="${k}"] .num`).getAttribute('data-value');
    return [k, v === '' ? null : Number(v)];
  })));
  report.overview = { shown: await shown(), status: await fromPage('/admin/status') };
  report.overview.charts = await page.locator('.card svg').count();
  report.overview.lines = await page.locator('.card svg polyline').count();
  await page.screenshot({ path: `${outDir}/console-overview.png` });
  step('overview');

  // Sources: each endpoint's state; then a new rate limit through the editor.
  await page.click('nav a[data-page=sources]');
  await ready('sources');
  const section = page.locator(`section[data-source="${settings.source}"]`);
  report.sources = {
    states: await section.locator('[data-state]').allInnerTexts(),
    success: await section.locator('[data-field=success]').allInnerTexts(),
  };
  await page.screenshot({ path: `${outDir}/console-sources.png` });
  await section.locator('button', { hasText: 'Edit source' }).click();
  // Only the rate: the write keys and the secret left blank are kept.
  await page.fill('#edit-rate_per_second', String(settings.rate));
  await page.click('#edit-save');
  await page.waitForSelector('#sources-note.ok-note', { timeout: 30_000 });
  report.sources.saved = await page.locator('#sources-note').innerText();
  report.sources.protection = await page.locator(`section[data-source="${settings.source}"] [data-field=protection]`).allInnerTexts();
  step('source changed');

  // A mapping tried on a stored call in the editor, then the editor closed
  // without saving.
  await page.locator(`section[data-source="${settings.source}"]`).locator('button', { hasText: 'Edit source' }).click();
  await page.fill('#edit-mapping', '{"u": {"@path": "userId"}, "e": {"@template": "{{event}}!"}}');
  await page.fill('#edit-try-id', settings.foundId);
  await page.click('#edit-try');
  await page.waitForFunction(() => document.getElementById('edit-try-result')?.textContent !== '', null, { timeout: 30_000 });
  report.sources.tried = await page.locator('#edit-try-result').textContent();
  await page.click('#edit-dialog button[value=cancel]');
  step('mapping tried');

  // Another site's forms, with the session cookie in the browser.
  report.crossSite = [];
  for (const origin of [`http://localhost:${port}`, `http://127.0.0.1:${port}`]) {
    for (const [path, target] of [['/replay', '/admin/replay'], ['/signin', '/console/session']]) {
      const attacker = await context.newPage();
      const answer = attacker.waitForResponse((r) => r.url() === `${relayUrl}${target}`, { timeout: 30_000 });
      await attacker.goto(`${origin}${path}`);
      const r = await answer;
      report.crossSite.push({
        from: origin, to: target, status: r.status(),
        setCookie: (await r.allHeaders())['set-cookie'] ?? null,
      });
      await attacker.close();
    }
  }
  report.afterCrossSite = await fromPage('/admin/status');
  report.cookiesAfterCrossSite = (await context.cookies(relayUrl)).length;
  step('cross-site refused');

  // The delivery log: find a call by userId, open its attempts.
  await page.click('nav a[data-page=log]');
  await ready('log');
  await page.fill('#f-userId', settings.userId);
  await page.click('#log-search');
  await page.waitForFunction(() => document.body.dataset.ready === 'log' && location.hash.includes('userId'));
  const rows = page.locator('#log-table tbody tr[data-message-id]');
  await rows.first().waitFor({ timeout: 30_000 });
  report.log = {
    found: await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.messageId)),
    notice: await page.locator('#log-table .notice').allInnerTexts(),
  };
  await rows.first().click();
  await page.waitForSelector('#call-attempts, #call-detail .error', { timeout: 30_000 });
  report.log.body = JSON.parse(await page.locator('#call-body').innerText());
  report.log.attempts = await page.locator('#call-attempts tbody tr').allInnerTexts();
  await page.screenshot({ path: `${outDir}/console-log.png` });
  // "Replay every matching call": its count asked, then cancelled.
  await page.click('#log-replay-all');
  await page.waitForSelector('#confirm[open]');
  report.log.replayAsked = await page.locator('#confirm-text').innerText();
  await page.click('#confirm-cancel');
  step('log');

  // Dead letters: pick the dead call, see the dry run's count, replay it.
  await page.click('nav a[data-page=dead]');
  await ready('dead');
  const row = page.locator(`#dead-table tr[data-message-id="${settings.deadId}"]`);
  await row.locator('input[type=checkbox]').check();
  await page.screenshot({ path: `${outDir}/console-dead-letters.png` });
  await page.click('#replay-selected');
  await page.waitForSelector('#confirm[open]');
  report.dead = { asked: await page.locator('#confirm-text').innerText() };
  await page.click('#confirm-ok');
  await page.waitForFunction(() => /Replaying/.test(document.getElementById('dead-note')?.textContent ?? ''),
    null, { timeout: 30_000 });
  report.dead.note = await page.locator('#dead-note').innerText();
  // Delivered: no dead letter left, as the page shows it.
  const deadline = Date.now() + 60_000;
  let status = await fromPage('/admin/status');
  while (status.dead !== 0 && Date.now() < deadline) {
    await page.waitForTimeout(200);
    status = await fromPage('/admin/status');
  }
  report.dead.statusAfter = status;
  step('dead letter replayed');

  // The refused calls: the latest 100, loaded when the tab opens.
  await page.click('button[data-tab=rejected]');
  await page.waitForSelector('#rejected-table', { timeout: 30_000 });
  step('rejected');

  // Privacy: a user deleted and suppressed, asked first, then listed in
  // the audit by a keyed hash.
  await page.click('nav a[data-page=privacy]');
  await ready('privacy');
  await page.fill('#p-userId', settings.userId);
  await page.fill('#p-operator', 'console-test');
  await page.check('#p-suppress');
  await page.click('#privacy-delete');
  await page.waitForSelector('#confirm[open]');
  report.privacy = {
    asked: await page.locator('#confirm-text').innerText(),
    ok: await page.locator('#confirm-ok').innerText(),
  };
  await page.click('#confirm-ok');
  await page.waitForFunction(() => /Deleted:/.test(document.getElementById('privacy-note')?.textContent ?? ''),
    null, { timeout: 30_000 });
  report.privacy.note = await page.locator('#privacy-note').innerText();
  report.privacy.rows = await page.locator('#deletions-table tbody tr').allInnerTexts();
  await page.screenshot({ path: `${outDir}/console-privacy.png` });
  step('privacy');

  // A name that is not a page (an Object.prototype key among them) shows
  // the overview.
  await page.evaluate(() => { location.hash = 'log'; });
  await ready('log');
  await page.evaluate(() => { location.hash = 'constructor'; });
  await ready('constructor');
  report.notAPage = await page.locator('h1').first().innerText();
  step('not a page');
  report.asked = asked.filter((a) => a.path.startsWith('/admin/replay') || a.path.startsWith('/admin/rejected'));
  report.errors = errors;
} catch (e) {
  report.failed = String(e.stack ?? e);
  code = 1;
} finally {
  await browser.close();
  server.close();
}
console.log(JSON.stringify(report));
process.exit(code);
