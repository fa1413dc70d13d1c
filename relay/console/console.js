// The relay's console: four pages over the admin API, rendered in the
// browser. Every read and action is an admin API request that carries
// the session cookie and the X-Callpost-Console header; nothing here is
// trusted with data the API did not give, and what the API gives (call
// bodies above all) is only ever set as text, never parsed as HTML.

const REFRESH_MS = 10_000; // the relay samples its history this often
const REJECTED_SHOWN = 100; // refused calls listed at once (each up to 32 KB)
const HOUR_MS = 3_600_000;
const SVG = 'http://www.w3.org/2000/svg'; // a namespace name, never fetched

// -- the admin API -----------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { 'X-Callpost-Console': '1' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
  });
  // Signed out (a new admin token, or the cookie is gone): the page
  // itself then shows the sign-in form.
  if (res.status === 401) {
    location.assign('/console/');
    throw new ApiError(401, 'unauthorized', 'signed out');
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    throw new ApiError(res.status, data?.code ?? 'error', data?.message ?? `HTTP ${res.status}`);
  }
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// -- the DOM -----------------------------------------------------------------

// h('td', {class: 'num'}, 'text', child…): attributes, `on*` listeners,
// and children (strings become text nodes; null and false are skipped).
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  put(el, attrs, children);
  return el;
}

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  put(el, attrs, children);
  return el;
}

function put(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const view = () => document.getElementById('view');

function show(...nodes) {
  view().replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

function failure(e) {
  return h('p', { class: 'error', role: 'alert' }, e instanceof ApiError ? `${e.message} (${e.code})` : String(e));
}

// -- formats -----------------------------------------------------------------

const pad = (n) => String(n).padStart(2, '0');

function when(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return '—';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function count(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US');
}

function rate(n) {
  if (n === null || n === undefined) return '—';
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2);
}

function percent(x) {
  return x === null || x === undefined ? '—' : `${(x * 100).toFixed(x === 1 ? 0 : 1)} %`;
}

function ms(x) {
  return x === null || x === undefined ? '—' : `${count(x)} ms`;
}

// -- charts ------------------------------------------------------------------

// A line over the last hour, or since the relay started when that is
// later (`from`): points are [time ms, value | null], a null breaks the
// line (the relay had no count then). The y axis starts at 0 and ends at
// the largest value (at least 1), labelled.
function chart(points, { from, now, label, format = count, width = 360, height = 110 }) {
  const top = 14;
  const bottom = height - 16;
  const span = Math.max(now - from, 1);
  const values = points.map(([, v]) => v).filter((v) => v !== null);
  const max = Math.max(1, ...values);
  const x = (t) => ((t - from) / span) * width;
  const y = (v) => bottom - (v / max) * (bottom - top);
  const runs = [];
  let run = [];
  for (const [t, v] of points) {
    if (t < from) continue;
    if (v === null) {
      if (run.length) runs.push(run);
      run = [];
    } else {
      run.push([x(t), y(v)]);
    }
  }
  if (run.length) runs.push(run);
  const line = (r) => r.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ');
  const minutes = Math.round(span / 60_000);
  const title = `${label}, the last ${minutes ? `${minutes} min` : `${Math.round(span / 1000)} s`}`;
  return s('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title },
    s('title', {}, title),
    s('line', { class: 'axis', x1: 0, x2: width, y1: bottom, y2: bottom }),
    s('line', { class: 'axis', x1: 0, x2: width, y1: top, y2: top, 'stroke-dasharray': '2 3' }),
    s('text', { x: 0, y: 10 }, format(max)),
    s('text', { x: 0, y: height - 3 }, minutes ? `−${minutes} min` : `−${Math.round(span / 1000)} s`),
    s('text', { x: width, y: height - 3, 'text-anchor': 'end' }, 'now'),
    runs.map((r) => [
      r.length > 1 ? s('polygon', { class: 'area', points: `${r[0][0]},${bottom} ${line(r)} ${r[r.length - 1][0]},${bottom}` }) : null,
      r.length > 1
        ? s('polyline', { class: 'series', points: line(r) })
        : s('circle', { cx: r[0][0], cy: r[0][1], r: 2.5, class: 'dot' }),
    ]),
  );
}

// Per-second rates from a counter's samples: the change from one sample
// to the next. A fall (a restart of the relay) counts as nothing
// happening, not as a negative rate.
function rates(samples, key) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1][key];
    const b = samples[i][key];
    const dt = (samples[i].at - samples[i - 1].at) / 1000;
    out.push([samples[i].at, a === undefined || b === undefined || dt <= 0 ? null : Math.max(0, b - a) / dt]);
  }
  return out;
}

// A count's samples; `zero` stands for a null count in a sample that has
// the store's counts (the oldest pending age when nothing is pending).
function series(samples, key, zero = false) {
  return samples.map((x) => {
    if (!('pending' in x)) return [x.at, null];
    return [x.at, x[key] ?? (zero ? 0 : null)];
  });
}

// -- overview ----------------------------------------------------------------

async function overview() {
  const [status, history] = await Promise.all([api('GET', '/admin/status'), api('GET', '/console/history')]);
  const samples = history.samples;
  const now = samples.length ? samples[samples.length - 1].at : Date.now();
  const from = Math.max(now - HOUR_MS, samples.length ? samples[0].at : now - HOUR_MS);
  const ingest = rates(samples, 'ingested');
  const delivery = rates(samples, 'delivered_total');
  const last = (xs) => (xs.length ? xs[xs.length - 1][1] : null);
  const card = (stat, label, value, shown, unit, points, format) =>
    h('section', { class: 'card', 'data-stat': stat },
      h('div', { class: 'label' }, label),
      h('div', {}, h('span', { class: 'num', 'data-value': value ?? '' }, shown), unit ? h('span', { class: 'unit' }, unit) : null),
      chart(points, { from, now, label, format }));
  show(
    h('h1', {}, 'Overview'),
    h('div', { class: 'cards' },
      card('ingest_rate', 'Ingest', last(ingest), rate(last(ingest)), 'calls/s', ingest, rate),
      card('delivery_rate', 'Deliveries', last(delivery), rate(last(delivery)), 'delivered/s', delivery, rate),
      card('pending', 'Backlog', status.pending, count(status.pending), 'pending', series(samples, 'pending'), count),
      card('oldest_pending_age_seconds', 'Oldest pending', status.oldest_pending_age_seconds,
        age(status.oldest_pending_age_seconds), '', series(samples, 'oldest_pending_age_seconds', true), age),
      card('dead', 'Dead letters', status.dead, count(status.dead), '', series(samples, 'dead'), count),
    ),
    h('p', { class: 'counts' },
      [['in_flight', 'In flight'], ['delivered', 'Delivered (kept)'], ['undeliverable', 'Undeliverable'], ['rejected', 'Rejected']]
        .map(([k, label]) => h('span', { 'data-stat': k }, `${label} `, h('b', { class: 'num', 'data-value': status[k] }, count(status[k]))))),
    h('p', { class: 'muted' },
      `Charts: one sample every ${history.interval_ms / 1000} s over the last hour, kept by this relay since it started. `,
      'Rates are per second between samples.'),
  );
  return REFRESH_MS;
}

// -- sources and destinations ------------------------------------------------

function stateOf(report, disabledUrls, url) {
  if (disabledUrls.includes(url)) return 'disabled';
  return report?.state?.kind ?? 'idle';
}

function protectionText(p) {
  const parts = [];
  parts.push(p.rate_per_second ? `${p.rate_per_second}/s` : 'no rate limit');
  if (p.max_in_flight) parts.push(`≤ ${p.max_in_flight} in flight`);
  parts.push(p.breaker_failures ? `breaker after ${p.breaker_failures}` : 'no breaker');
  if (p.disable_after_ms) parts.push(`disable after ${age(p.disable_after_ms / 1000)}`);
  return parts.join(', ');
}

async function sources() {
  const [list, status] = await Promise.all([api('GET', '/admin/sources'), api('GET', '/admin/status')]);
  const reports = new Map((status.endpoints ?? []).map((e) => [e.url, e]));
  const disabledUrls = status.disabled_endpoints ?? [];
  const shown = new Set();
  const endpointRows = (endpoints) => endpoints.map((e) => {
    shown.add(e.url);
    const r = reports.get(e.url);
    const state = stateOf(r, disabledUrls, e.url);
    return h('tr', { 'data-url': e.url },
      h('td', { class: 'url mono' }, e.url, e.headers?.length ? h('div', { class: 'muted' }, `headers: ${e.headers.join(', ')}`) : null,
        e.auth || e.client_certificate ? h('div', { class: 'muted', 'data-field': 'auth' },
          [e.auth === 'oauth2' ? `OAuth 2.0 via ${e.token_url}` : e.auth === 'basic' ? 'Basic auth' : null,
            e.client_certificate ? 'client certificate' : null].filter(Boolean).join(', ')) : null),
      h('td', {}, h('span', { class: `badge ${state}`, 'data-state': state }, state.replace('_', ' ')),
        r?.state?.until ? h('div', { class: 'muted' }, `until ${when(Date.parse(r.state.until))}`) : null),
      h('td', { class: 'num', 'data-field': 'success' }, percent(r?.recent_success_rate),
        r?.recent_answers ? h('div', { class: 'muted' }, `of ${r.recent_answers}`) : null),
      h('td', { class: 'num' }, ms(r?.recent_latency_p50_ms)),
      h('td', { class: 'num' }, ms(r?.recent_latency_p95_ms)),
      h('td', { class: 'num' }, count(r?.in_flight ?? 0)),
      h('td', { class: 'num' }, count(r?.failures ?? 0)),
      e.protection ? h('td', { 'data-field': 'protection' }, protectionText(e.protection)) : h('td', {}, '—'),
      h('td', {}, state === 'disabled'
        ? h('button', { class: 'primary', onclick: (ev) => enable(ev.currentTarget, e.url) }, 'Enable')
        : null),
    );
  });
  const head = h('tr', {}, ['Endpoint', 'State', 'Success', 'p50', 'p95', 'In flight', 'Failures', 'Protection', '']
    .map((t, i) => h('th', { class: i >= 2 && i <= 6 ? 'num' : null }, t)));
  // Each destination of a source: its name (and trigger, when it has
  // one), how it sends, and its endpoints.
  const summary = (d) => `${d.mode} · ${d.method} · ${d.enabled ? 'sending' : 'kept, not sent'} · signature ${d.signature} · ${d.filters} filter rule(s)${d.mapped ? ' · mapped body' : ''}`;
  const destinationBlock = (src, d) => h('div', { class: 'destination', 'data-destination': d.name },
    h('div', { class: 'row' },
      h('h3', {}, d.name),
      h('span', { class: 'muted' }, summary(d)),
      d.trigger ? h('span', { class: 'muted mono', 'data-field': 'trigger' }, `trigger ${JSON.stringify(d.trigger)}`) : null,
      h('button', { class: 'edit-destination', onclick: () => editSource(src, d) }, `Edit ${d.name}`)),
    h('table', {}, h('thead', {}, head.cloneNode(true)), h('tbody', {}, endpointRows(d.endpoints))));
  const sections = list.map((src) => {
    const destinations = src.destinations ?? (src.webhooks ? [{ name: 'webhooks', ...src.webhooks }] : []);
    return h('section', { class: 'panel', 'data-source': src.name },
      h('div', { class: 'row' },
        h('h2', {}, src.name),
        h('span', { class: 'muted' }, `${src.write_keys} write key${src.write_keys === 1 ? '' : 's'} · ${destinations.length} destination${destinations.length === 1 ? '' : 's'}`),
        h('button', { onclick: () => editSource(src) }, 'Edit source'),
      ),
      destinations.length
        ? destinations.map((d) => destinationBlock(src, d))
        : h('p', { class: 'muted' }, 'No destination: its calls are kept as undeliverable.'),
    );
  });
  const others = (status.endpoints ?? []).filter((e) => !shown.has(e.url));
  show(
    h('h1', {}, 'Sources & destinations'),
    h('p', { class: 'muted' },
      'State, success rate and latency are this relay\'s, over each endpoint\'s latest answers; ',
      'disabled endpoints are shared by every relay on the database.'),
    sections,
    others.length ? h('section', { class: 'panel' }, h('h2', {}, 'Other endpoints this relay has posted to'),
      h('table', {}, h('thead', {}, head), h('tbody', {}, endpointRows(others.map((e) => ({ url: e.url })))))) : null,
    h('p', { id: 'sources-note', role: 'status' }),
  );
  return REFRESH_MS;
}

async function enable(button, url) {
  button.disabled = true;
  try {
    await api('POST', '/admin/endpoints/enable', { url });
    await render();
    note('sources-note', `Enabled ${url}.`);
  } catch (e) {
    button.disabled = false;
    note('sources-note', e, true);
  }
}

function note(id, what, bad = false) {
  const el = document.getElementById(id);
  if (!el) return;
  el.className = bad ? 'error' : 'ok-note';
  el.textContent = what instanceof ApiError ? `${what.message} (${what.code})` : String(what);
}

// The source editor: it saves with a JSON Merge Patch (PATCH), sending
// only what it shows, so what the relay never shows (URLs' query
// credentials, secrets, header values, filter rules, batch settings)
// stays as it is stored. A secret field left blank keeps the stored one.
// With `dest`, it edits that destination alone (PATCH
// /admin/sources/{name}/destinations/{destination}); without, the
// source's write keys and its destination named webhooks.
function editSource(src, dest) {
  const w = dest ?? src.webhooks;
  const p = w?.endpoints?.[0]?.protection ?? {};
  const field = (name, label, attrs = {}) =>
    h('div', { class: attrs.wide ? 'wide' : null }, h('label', { for: `edit-${name}` }, label),
      h(attrs.multiline ? 'textarea' : 'input', { id: `edit-${name}`, name, ...attrs, wide: null, multiline: null }));
  const form = h('form', { method: 'dialog', id: 'edit-source' },
    h('h2', {}, dest ? `Edit ${src.name} → ${dest.name}` : `Edit ${src.name}`),
    h('p', { class: 'muted' },
      'Saving changes only what this form shows (PATCH /admin/sources/', src.name,
      dest ? `/destinations/${dest.name}` : '',
      '): the URLs, filters, extra headers, batch settings and signing secrets stay as they are. ',
      dest ? 'It changes this destination alone. ' : 'It edits the write keys and the destination named webhooks; each destination has its own editor. ',
      'The relay never shows secrets: leave a secret blank to keep it.'),
    h('div', { class: 'grid' },
      dest ? null : field('write_keys', 'Write keys (one a line; blank: keep them)', { multiline: true, wide: true, rows: 2, autocomplete: 'off' }),
      w ? field('shared_secret', 'Shared secret (blank: keep it)', { type: 'password', wide: true, autocomplete: 'new-password' }) : null,
      w ? field('rate_per_second', 'Rate limit (requests/s, empty: none)', { type: 'number', min: 1, value: p.rate_per_second ?? '' }) : null,
      w ? field('max_in_flight', 'Max in flight (empty: none)', { type: 'number', min: 1, value: p.max_in_flight ?? '' }) : null,
      w ? field('breaker_failures', 'Breaker: failures in a row (0: off)', { type: 'number', min: 0, value: p.breaker_failures ?? 10 }) : null,
      w ? field('breaker_open_ms', 'Breaker: first open time (ms)', { type: 'number', min: 1, value: p.breaker_open_ms ?? 30000 }) : null,
      w ? field('disable_after_ms', 'Disable after failing for (ms, empty: never)', { type: 'number', min: 1, value: p.disable_after_ms ?? '' }) : null,
      w ? h('div', { class: 'wide' }, h('label', {},
        h('input', { type: 'checkbox', name: 'enabled', id: 'edit-enabled', checked: w.enabled }), ' Send calls (off: keep them as undeliverable)')) : null,
      w ? h('div', {}, h('label', { for: 'edit-method' }, 'Method'),
        h('select', { id: 'edit-method', name: 'method' },
          ...['POST', 'PUT', 'PATCH'].map((m) => h('option', { value: m, selected: (w.method ?? 'POST') === m }, m)))) : null,
      w ? field('mapping', 'Mapping (JSON, docs/mappings.md; empty: the spec\'s body)', { multiline: true, wide: true, rows: 6, spellcheck: 'false' }) : null,
      w ? h('div', { class: 'wide' },
        h('label', { for: 'edit-try-id' }, 'Try the mapping on a stored call (its messageId)'),
        h('input', { id: 'edit-try-id', autocomplete: 'off' }),
        h('button', { type: 'button', id: 'edit-try', onclick: () => tryMapping(src.name, form, w.name) }, 'Try'),
        h('pre', { id: 'edit-try-result', class: 'muted' })) : null,
    ),
    h('p', { id: 'edit-error', class: 'error', role: 'alert' }),
    h('menu', {},
      h('button', { value: 'cancel', formnovalidate: true }, 'Cancel'),
      h('button', { value: 'save', class: 'primary', id: 'edit-save' }, 'Save')),
  );
  // Shown as text, and compared on save: a mapping left as it was is not
  // sent, so saving changes only what the operator changed.
  const shownMapping = w?.mapping ? JSON.stringify(w.mapping, null, 2) : '';
  if (w) form.querySelector('#edit-mapping').value = shownMapping;
  const dialog = h('dialog', { id: 'edit-dialog' }, form);
  document.body.append(dialog);
  dialog.addEventListener('close', () => dialog.remove());
  form.addEventListener('submit', async (ev) => {
    if (ev.submitter?.value !== 'save') return;
    ev.preventDefault();
    const f = new FormData(form);
    // An empty number field removes the setting (null, in a merge patch).
    const num = (k) => (f.get(k) === '' || f.get(k) === null ? null : Number(f.get(k)));
    const patch = {};
    const keys = String(f.get('write_keys') ?? '').split('\n').map((k) => k.trim()).filter(Boolean);
    if (keys.length) patch.write_keys = keys;
    if (w) {
      patch.webhooks = {
        enabled: f.get('enabled') !== null,
        protection: {
          rate_per_second: num('rate_per_second'),
          max_in_flight: num('max_in_flight'),
          breaker_failures: num('breaker_failures'),
          breaker_open_ms: num('breaker_open_ms'),
          disable_after_ms: num('disable_after_ms'),
        },
      };
      if (f.get('shared_secret')) patch.webhooks.shared_secret = String(f.get('shared_secret'));
      if (f.get('method') !== (w.method ?? 'POST')) patch.webhooks.method = f.get('method');
      const mapping = String(f.get('mapping') ?? '').trim();
      if (mapping !== shownMapping.trim()) {
        try {
          patch.webhooks.mapping = mapping ? JSON.parse(mapping) : null;
        } catch (e) {
          document.getElementById('edit-error').textContent = `The mapping is not JSON: ${e.message}`;
          return;
        }
      }
    }
    try {
      const path = `/admin/sources/${encodeURIComponent(src.name)}`;
      const out = dest
        ? await api('PATCH', `${path}/destinations/${encodeURIComponent(dest.name)}`, patch.webhooks ?? {})
        : await api('PATCH', path, patch);
      dialog.close();
      await render();
      const c = out.changes ?? {};
      note('sources-note', `Saved ${src.name}: ${['added', 'changed', 'removed'].map((k) => `${(c[k] ?? []).length} ${k}`).join(', ')}.`);
    } catch (e) {
      document.getElementById('edit-error').textContent = e instanceof ApiError ? `${e.message} (${e.code})` : String(e);
    }
  });
  dialog.showModal();
}

// Shows what the editor's mapping (or, empty, the spec's body) builds for
// a stored call of the source, before anything is saved.
async function tryMapping(source, form, destination) {
  const out = form.querySelector('#edit-try-result');
  const text = form.querySelector('#edit-mapping').value.trim();
  const messageId = form.querySelector('#edit-try-id').value.trim();
  try {
    const body = { source, messageId, ...(destination ? { destination } : {}) };
    body.mapping = text ? JSON.parse(text) : null;
    const r = await api('POST', '/admin/mappings/try', body);
    out.textContent = r.body ?? (r.filtered !== undefined ? `Dropped by filter rule ${r.filtered}.` : `${r.message} (${r.code})`);
  } catch (e) {
    out.textContent = e instanceof ApiError ? `${e.message} (${e.code})` : String(e);
  }
}

// -- replays -----------------------------------------------------------------

// Asks the relay how many calls a replay would send again, then, once the
// operator confirms that number, replays them. Says how it went in the
// element `noteId`, and returns whether anything was replayed.
async function replay(filters, noteId) {
  const list = Array.isArray(filters) ? filters : [filters];
  const calls = (n) => `${n} call${n === 1 ? '' : 's'}`;
  try {
    let n = 0;
    for (const filter of list) n += (await api('POST', '/admin/replay', { ...filter, dryRun: true })).would_replay ?? 0;
    if (n === 0) {
      note(noteId, 'Nothing to replay: no call matches.');
      return false;
    }
    if (!(await confirm(`Replay ${calls(n)}? Each is delivered again from its first attempt.`))) return false;
    let replayed = 0;
    for (const filter of list) replayed += (await api('POST', '/admin/replay', filter)).replayed ?? 0;
    // The count and the replay are two requests: calls that died or were
    // delivered in between change the number.
    note(noteId, replayed === n ? `Replaying ${calls(replayed)}.` : `Replaying ${calls(replayed)} (${n} matched when counted).`);
    return true;
  } catch (e) {
    note(noteId, e, true);
    return false;
  }
}

function confirm(text, ok = 'Replay') {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = ok;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.returnValue = '';
    dialog.showModal();
  });
}

// -- the delivery log --------------------------------------------------------

const STATUSES = ['pending', 'delivered', 'dead', 'undeliverable', 'rejected'];
const TYPES = ['track', 'identify', 'page', 'screen', 'group', 'alias'];
const FILTERS = ['messageId', 'userId', 'anonymousId', 'event', 'type', 'source', 'destination', 'status', 'since', 'until'];

function hashParams() {
  const at = location.hash.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : location.hash.slice(at + 1));
}

async function log() {
  const params = hashParams();
  const filter = {};
  for (const k of FILTERS) if (params.get(k)) filter[k] = params.get(k);
  const limit = params.get('limit') || '100';
  const names = await api('GET', '/admin/sources').then((l) => l.map((x) => x.name)).catch(() => []);
  const input = (name, label, attrs = {}) => h('div', {}, h('label', { for: `f-${name}` }, label),
    h('input', { id: `f-${name}`, name, value: filter[name] ?? '', ...attrs }));
  const select = (name, label, options) => h('div', {}, h('label', { for: `f-${name}` }, label),
    h('select', { id: `f-${name}`, name }, h('option', { value: '' }, 'any'),
      options.map((o) => h('option', { value: o, selected: filter[name] === o }, o))));
  const form = h('form', { class: 'panel filters', id: 'log-filters' },
    h('div', { class: 'row' },
      input('userId', 'userId'), input('anonymousId', 'anonymousId'), input('messageId', 'messageId'),
      input('event', 'event'), select('type', 'type', TYPES), select('source', 'source', names),
      input('destination', 'destination'),
      select('status', 'status', STATUSES),
      input('since', 'since (ISO 8601)', { placeholder: '2025-01-31T12:00:00Z' }),
      input('until', 'until (ISO 8601)'),
      h('div', {}, h('label', { for: 'f-limit' }, 'limit'), h('input', { id: 'f-limit', name: 'limit', type: 'number', min: 1, max: 1000, value: limit })),
      h('div', {}, h('button', { class: 'primary', type: 'submit', id: 'log-search' }, 'Search')),
    ));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, String(v));
    location.hash = `log?${q}`;
  });
  const body = h('tbody', {});
  const detail = h('section', { class: 'panel detail', id: 'call-detail', hidden: true });
  const more = h('button', { id: 'log-more', hidden: true }, 'More');
  const replayAll = h('button', { id: 'log-replay-all', disabled: true }, 'Replay every matching call…');
  show(
    h('h1', {}, 'Delivery log'),
    form,
    h('section', { class: 'panel' },
      h('div', { class: 'actions' }, replayAll, h('span', { id: 'log-note', role: 'status' })),
      h('table', { id: 'log-table' },
        h('thead', {}, h('tr', {}, ['Received', 'Source', 'Destination', 'Type', 'Event', 'User', 'messageId', 'Status', 'Attempts']
          .map((t) => h('th', { class: t === 'Attempts' ? 'num' : null }, t)))),
        body),
      more),
    detail,
  );
  let cursor = null;
  const page = async () => {
    let answer;
    try {
      answer = await api('GET', `/admin/log${query({ ...filter, limit, cursor })}`);
    } catch (e) {
      const missing = e instanceof ApiError && e.status === 404;
      body.append(h('tr', {}, h('td', { colspan: 9 }, missing
        ? h('p', { class: 'notice' }, 'This relay has no delivery log (GET /admin/log): update it to search its calls.')
        : failure(e))));
      return;
    }
    for (const c of answer.calls) body.append(logRow(c, detail));
    if (!body.children.length) body.append(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No call matches.')));
    cursor = answer.next;
    more.hidden = !cursor;
    replayAll.disabled = !answer.calls.some((c) => c.status !== 'rejected');
  };
  more.addEventListener('click', page);
  replayAll.addEventListener('click', () => {
    // The search takes one messageId; a replay, a list of them. Without a
    // status the list shows every state, so the replay takes the delivered
    // and undeliverable calls too (the API alone takes dead letters).
    const { messageId, ...rest } = filter;
    const every = rest.status ? {} : { includeDelivered: true, includeUndeliverable: true };
    replay({ ...rest, ...every, ...(messageId ? { messageIds: [messageId] } : {}) }, 'log-note');
  });
  await page();
  return null;
}

function logRow(c, detail) {
  if (c.status === 'rejected') {
    return h('tr', { 'data-status': 'rejected' },
      h('td', {}, when(c.received_at)), h('td', {}, c.source), h('td', {}),
      h('td', { colspan: 4 }, h('span', { class: 'mono' }, c.code), ' ', c.reason),
      h('td', {}, h('span', { class: 'badge rejected' }, 'rejected')), h('td', {}));
  }
  const row = h('tr', { class: 'pick', 'data-message-id': c.message_id, 'data-source': c.source, 'data-destination': c.destination ?? '', tabindex: 0 },
    h('td', {}, when(c.received_at)), h('td', {}, c.source), h('td', {}, c.destination || '—'),
    h('td', {}, c.type), h('td', {}, c.event ?? ''),
    h('td', {}, c.user_id ?? (c.anonymous_id ? `anon ${c.anonymous_id}` : '')),
    h('td', { class: 'mono' }, c.message_id),
    h('td', {}, h('span', { class: `badge ${c.status}` }, c.status)),
    h('td', { class: 'num' }, count(c.attempts)));
  const open = () => {
    for (const r of row.parentElement.querySelectorAll('tr.chosen')) r.classList.remove('chosen');
    row.classList.add('chosen');
    callDetail(c.source, c.message_id, detail, c.destination);
  };
  row.addEventListener('click', open);
  row.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') open(); });
  return row;
}

async function callDetail(source, messageId, detail, destination) {
  detail.hidden = false;
  detail.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  let call;
  try {
    call = await api('GET', `/admin/log/call${query({ source, messageId, destination })}`);
  } catch (e) {
    detail.replaceChildren(failure(e));
    return;
  }
  const attempts = call.attempts ?? [];
  detail.replaceChildren(
    h('div', { class: 'row' },
      h('h2', {}, 'Call ', h('span', { class: 'mono' }, messageId)),
      h('span', { class: `badge ${call.status}` }, call.status),
      h('span', { class: 'muted' }, `${source}${destination ? ` → ${destination}` : ''} · received ${when(call.received_at)}`),
      ['dead', 'delivered', 'undeliverable'].includes(call.status)
        ? h('button', {
          id: 'call-replay',
          onclick: () => replay({ messageIds: [messageId], source, ...(destination ? { destination } : {}), status: call.status }, 'call-note'),
        }, 'Replay this call…')
        : null,
      h('span', { id: 'call-note', role: 'status' })),
    h('div', { class: 'cols' },
      h('div', {}, h('h3', {}, 'Body'), h('pre', { id: 'call-body' }, JSON.stringify(call.message, null, 2))),
      h('div', {},
        h('h3', {}, `Attempts (${attempts.length})`),
        attempts.length
          ? h('table', { id: 'call-attempts' },
            h('thead', {}, h('tr', {}, ['#', 'Round', 'Endpoint', 'Sent', 'Latency', 'Result'].map((t) => h('th', {}, t)))),
            h('tbody', {}, attempts.map((a) => h('tr', {},
              h('td', {}, a.attempt), h('td', {}, a.round), h('td', { class: 'url mono' }, a.url ?? a.endpoint),
              h('td', {}, when(a.sent_at)), h('td', { class: 'num' }, ms(a.latency_ms)),
              h('td', {}, attemptResult(a),
                a.answer ? h('div', { class: 'muted mono' }, String(a.answer).slice(0, 200)) : null)))))
          : h('p', { class: 'muted' }, 'No attempt yet.'),
        call.outcome ? [h('h3', {}, 'Outcome'), h('pre', {}, JSON.stringify(call.outcome, null, 2))] : null)),
  );
}

// -- dead letters, undeliverable and rejected calls ---------------------------

async function dead() {
  const tab = hashParams().get('tab') || 'dead';
  const tabs = h('div', { class: 'tabs', role: 'tablist' },
    [['dead', 'Dead letters'], ['undeliverable', 'Undeliverable'], ['rejected', 'Rejected']].map(([k, label]) =>
      h('button', { role: 'tab', 'aria-selected': String(k === tab), 'data-tab': k, onclick: () => { location.hash = `dead?tab=${k}`; } }, label)));
  const panel = h('section', { class: 'panel' });
  show(h('h1', {}, 'Dead letters'), tabs, panel);
  if (tab === 'rejected') {
    // The latest 100, loaded when asked rather than every few seconds: each
    // keeps up to 32 KB of what was sent, and anyone with a write key (a
    // browser's is public) can fill the list.
    const rows = await api('GET', `/admin/rejected?limit=${REJECTED_SHOWN}`);
    const again = h('button', { id: 'rejected-again', onclick: () => render() }, 'Load again');
    panel.append(
      h('p', { class: 'muted' }, 'Calls refused inside accepted batches: they were never stored as calls, so there is nothing to replay; the sender must fix and send them again. The latest ', String(REJECTED_SHOWN), ' are shown.'),
      h('div', { class: 'actions' }, again),
      h('table', { id: 'rejected-table' },
        h('thead', {}, h('tr', {}, ['Received', 'Source', 'Code', 'Reason', 'As it came'].map((t) => h('th', {}, t)))),
        h('tbody', {}, rows.length ? rows.map((r) => h('tr', {},
          h('td', {}, when(r.received_at)), h('td', {}, r.source), h('td', { class: 'mono' }, r.code), h('td', {}, r.reason),
          h('td', {}, h('details', {}, h('summary', {}, 'body'), h('pre', {}, r.text))))) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'None.')))));
    return null;
  }
  let rows;
  if (tab === 'dead') {
    rows = (await api('GET', '/admin/dead-letters?limit=1000')).map((d) => {
      let outcome = null;
      try { outcome = d.outcome ? JSON.parse(d.outcome) : null; } catch { outcome = null; }
      const why = outcome ? [outcome.reason, outcome.last ? attemptResult({ outcome: outcome.last }) : null].filter(Boolean).join(': ') : '';
      return { source: d.source, message_id: d.message_id, type: d.kind, received_at: d.received_at, finished_at: d.finished_at, attempts: d.attempts, why };
    });
  } else {
    try {
      rows = (await api('GET', '/admin/log?status=undeliverable&limit=1000')).calls.map((c) => ({ ...c, why: 'no enabled destination' }));
    } catch (e) {
      panel.append(e instanceof ApiError && e.status === 404
        ? h('p', { class: 'notice' }, 'This relay has no delivery log (GET /admin/log) to list its undeliverable calls.')
        : failure(e));
      return null;
    }
  }
  const all = h('input', { type: 'checkbox', id: 'pick-all', 'aria-label': 'Select all' });
  const button = h('button', { class: 'primary', id: 'replay-selected', disabled: true }, 'Replay selected…');
  const picked = () => [...panel.querySelectorAll('tbody input[type=checkbox]:checked')];
  const update = () => {
    const n = picked().length;
    button.disabled = n === 0;
    button.textContent = n ? `Replay ${n} selected…` : 'Replay selected…';
  };
  all.addEventListener('change', () => {
    for (const c of panel.querySelectorAll('tbody input[type=checkbox]')) c.checked = all.checked;
    update();
  });
  button.addEventListener('click', async () => {
    // A messageId names a call within its source: one replay per source.
    const bySource = new Map();
    for (const c of picked()) {
      const ids = bySource.get(c.dataset.source) ?? [];
      ids.push(c.value);
      bySource.set(c.dataset.source, ids);
    }
    const filters = [...bySource].map(([source, messageIds]) => ({ source, messageIds, status: tab }));
    if (await replay(filters, 'dead-note')) {
      // The list without the replayed calls, and what was done above it.
      const said = document.getElementById('dead-note').textContent;
      await render();
      note('dead-note', said);
    }
  });
  panel.append(
    h('div', { class: 'actions' }, button, h('span', { id: 'dead-note', role: 'status' })),
    h('table', { id: 'dead-table' },
      h('thead', {}, h('tr', {}, h('th', {}, all), ['Received', 'Source', 'Type', 'messageId', 'Attempts', 'Ended', 'Why']
        .map((t) => h('th', { class: t === 'Attempts' ? 'num' : null }, t)))),
      h('tbody', {}, rows.length ? rows.map((r) => h('tr', { 'data-message-id': r.message_id },
        h('td', {}, h('input', { type: 'checkbox', value: r.message_id, 'data-source': r.source, 'aria-label': `Select ${r.message_id}`, onchange: update })),
        h('td', {}, when(r.received_at)), h('td', {}, r.source), h('td', {}, r.type),
        h('td', { class: 'mono' }, h('a', { href: `#log?${new URLSearchParams({ messageId: r.message_id, source: r.source })}` }, r.message_id)),
        h('td', { class: 'num' }, count(r.attempts)), h('td', {}, when(r.finished_at)), h('td', {}, r.why)))
        : h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'None.')))),
  );
  // Keep what the operator is choosing: refresh only when nothing is picked.
  return null;
}

// -- privacy: a user's deletion, suppression and the audit --------------------

async function privacy() {
  const field = (name, label, attrs = {}) => h('div', {}, h('label', { for: `p-${name}` }, label),
    h('input', { id: `p-${name}`, name, ...attrs }));
  const form = h('form', { class: 'panel filters', id: 'privacy-form' },
    h('div', { class: 'row' },
      field('userId', 'userId or anonymousId', { required: true, autocomplete: 'off' }),
      field('operator', 'operator (for the audit record)', { placeholder: 'admin-api' }),
      h('div', {}, h('label', { for: 'p-suppress' }, h('input', { id: 'p-suppress', name: 'suppress', type: 'checkbox' }),
        ' and take none of their calls from now on')),
      h('div', {}, h('button', { class: 'primary', type: 'submit', id: 'privacy-delete' }, 'Delete user…'),
        ' ', h('button', { type: 'button', id: 'privacy-unsuppress' }, 'Take their calls again')),
    ));
  const body = h('tbody', {});
  show(
    h('h1', {}, 'Privacy'),
    h('p', { class: 'muted' }, 'A deletion erases every stored call of the user (by userId and by anonymousId, in every state, with its attempts) across sources, and the refused calls that name them; sends the delete notifications; and keeps a record with the id as a keyed hash, never the id.'),
    form,
    h('p', { id: 'privacy-note', role: 'status' }),
    h('section', { class: 'panel' }, h('h2', {}, 'Deletions'),
      h('table', { id: 'deletions-table' },
        h('thead', {}, h('tr', {}, ['When', 'Operator', 'Calls erased', 'Refused erased', 'Suppressed', 'User (keyed hash)']
          .map((t) => h('th', {}, t)))), body)),
  );
  const values = () => {
    const data = new FormData(form);
    const operator = String(data.get('operator') || '').trim();
    return { userId: String(data.get('userId') || ''), ...(operator ? { operator } : {}), suppress: data.get('suppress') === 'on' };
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const { userId, operator, suppress } = values();
    if (!(await confirm(`Delete every stored call of ${userId}?${suppress ? ' Their later calls will be acknowledged and dropped.' : ''} This cannot be undone.`, 'Delete'))) return;
    try {
      const d = await api('POST', '/admin/delete', { userId, suppress, ...(operator ? { operator } : {}) });
      note('privacy-note', `Deleted: ${d.erased.calls} stored call row(s) and ${d.erased.rejected} refused call(s) erased; delete notifications for ${d.sources.length} source(s)${d.suppressed ? '; the user is suppressed' : ''}.`);
      await deletions(body);
    } catch (e) {
      note('privacy-note', e, true);
    }
  });
  document.getElementById('privacy-unsuppress').addEventListener('click', async () => {
    const { userId, operator } = values();
    try {
      const r = await api('POST', '/admin/unsuppress', { userId, ...(operator ? { operator } : {}) });
      note('privacy-note', r.lifted ? 'Their calls are taken again.' : 'This user was not suppressed.');
    } catch (e) {
      note('privacy-note', e, true);
    }
  });
  await deletions(body);
  return null;
}

async function deletions(body) {
  const { deletions: rows } = await api('GET', '/admin/deletions?limit=100');
  body.replaceChildren(...(rows.length ? rows.map((r) => h('tr', {},
    h('td', {}, when(r.at)), h('td', {}, r.operator), h('td', { class: 'num' }, count(r.calls)),
    h('td', { class: 'num' }, count(r.rejected)), h('td', {}, r.suppressed ? 'yes' : 'no'),
    h('td', { class: 'mono' }, r.userHash ? `${r.userHash.slice(0, 16)}…` : '(no key)')))
    : [h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'None.'))]));
}

// An attempt's result: its HTTP status, or how it failed without one
// (the core's outcome record, or the flat form of the log's contract).
function attemptResult(a) {
  const o = a.outcome ?? {};
  const status = a.status ?? o.status;
  if (status !== undefined) return `HTTP ${status}`;
  return [a.error ?? o.kind, o.message ?? o.reason].filter(Boolean).join(': ');
}

// -- pages -------------------------------------------------------------------

const PAGES = { overview, sources, log, dead, privacy };
let timer = null;
let rendering = 0;

async function render() {
  clearTimeout(timer);
  const name = location.hash.slice(1).split('?')[0] || 'overview';
  // Only the page's own names: `#constructor` is not a page.
  const page = Object.hasOwn(PAGES, name) ? PAGES[name] : overview;
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.page === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const mine = ++rendering;
  let again = null;
  try {
    again = await page();
  } catch (e) {
    if (mine === rendering) show(h('h1', {}, 'Something went wrong'), failure(e));
  }
  // A refresh waits while a dialog is open, so it never pulls the page out
  // from under the operator.
  if (again && mine === rendering) {
    timer = setTimeout(function tick() {
      if (document.querySelector('dialog[open]')) timer = setTimeout(tick, again);
      else render();
    }, again);
  }
  document.body.dataset.ready = name;
}

window.addEventListener('hashchange', () => {
  delete document.body.dataset.ready;
  render();
});
render();
