// Every js and mjs code block of the docs runs here, against the installed
// package, so the docs cannot go stale. python/tests/test_docs.py checks
// the blocks of the other languages (python, toml, sh, text, rust, json); a
// block of a language neither file handles fails in both.
//
// A block runs as an ES module in a fresh `node`, from an empty directory
// whose node_modules is this one's (so `callpost` is the installed
// package), and must exit 0. A block whose info string is `js fragment`
// is an illustration with names it does not define, or code for another
// runtime (Workers, Deno, Bun, Next.js): `node --check` must parse it.
//
// The examples read their settings from the environment, as a deployed app
// does: WRITE_KEY, RELAY_URL (here a local Tracking API that answers 200 to
// that write key), WEBHOOK_URL (a local receiver that checks X-Signature)
// and WEBHOOK_SECRET. Whatever the server refused fails the block that
// sent it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifyRequest } from 'callpost';
import { serve } from './helpers.mjs';

const root = fileURLToPath(new URL('../../', import.meta.url));
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => join('docs', f)),
  'python/README.md',
  'wasm/README.md',
  'relay/README.md',
];
const HANDLED_HERE = new Set(['js', 'mjs']);
const HANDLED_BY_PYTHON = new Set(['python', 'toml', 'sh', 'text', 'rust', 'json']);
// go/e2e/docs_test.go builds and runs them (scripts/test-go.sh).
const HANDLED_BY_GO = new Set(['go']);
const MAY_BE_FRAGMENT = new Set(['python', 'js', 'mjs']);
const WRITE_KEY = 'docs-write-key';
const WEBHOOK_SECRET = 'docs-webhook-secret';
// Long enough for anything an example does; only a hang reaches it.
const RUN_TIMEOUT_MS = 120_000;

// The fenced blocks of a Markdown file; a fence must start its line.
function parse(file) {
  const blocks = [];
  let opened = null;
  let lines = [];
  readFileSync(join(root, file), 'utf8').split('\n').forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    const stripped = line.trim();
    if ((stripped.startsWith('```') && line !== stripped) || stripped.startsWith('~~~')) {
      throw new Error(`${where}: fences must be \`\`\` at the start of a line`);
    }
    if (!line.startsWith('```')) {
      if (opened) lines.push(line);
      return;
    }
    if (!opened) {
      const [lang = '', ...options] = line.slice(3).trim().split(/\s+/).filter(Boolean);
      opened = { where, lang, options };
      lines = [];
      return;
    }
    if (line !== '```') throw new Error(`${where}: a closing fence takes no info string`);
    blocks.push({ ...opened, code: `${lines.join('\n')}\n` });
    opened = null;
  });
  if (opened) throw new Error(`${opened.where}: a fence is never closed`);
  return blocks;
}

const blocks = docs.flatMap(parse);

test('every block of the docs has a test', () => {
  const untested = blocks.filter((b) =>
    !(HANDLED_HERE.has(b.lang) || HANDLED_BY_PYTHON.has(b.lang) || HANDLED_BY_GO.has(b.lang))
    || b.options.some((o) => o !== 'fragment')
    || (b.options.includes('fragment') && !MAY_BE_FRAGMENT.has(b.lang)));
  assert.deepEqual(untested.map((b) => `${b.where}: \`\`\`${[b.lang, ...b.options].join(' ')}`), []);
  assert.ok(blocks.filter((b) => HANDLED_HERE.has(b.lang)).length > 10, 'the docs lost their examples, or the parser lost the docs');
});

// One server on 127.0.0.1 for both: a Tracking API (Basic auth with
// WRITE_KEY) and a webhook receiver (X-Signature under WEBHOOK_SECRET).
const refused = [];
let server;
const basic = `Basic ${Buffer.from(`${WRITE_KEY}:`).toString('base64')}`;
before(async () => {
  server = await serve((n, req, body) => {
    const ok = req.headers['x-signature'] !== undefined
      ? verifyRequest(body, req.headers, WEBHOOK_SECRET)
      : req.url === '/v1/batch' && req.headers.authorization === basic;
    if (!ok) refused.push(`${req.url} ${req.headers['user-agent']}`);
    return ok
      ? [200, { 'content-type': 'application/json' }, '{"success":true}']
      : [401, { 'content-type': 'application/json' }, '{"code":"refused"}'];
  });
});
after(() => server.close());

// `node args…` in `dir`: its exit code and output.
function node(args, dir, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: dir, env, timeout: RUN_TIMEOUT_MS });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, output }));
  });
}

// An empty directory that resolves `callpost` (and the other packages
// installed here) as this test does.
function workdir() {
  const dir = mkdtempSync(join(tmpdir(), 'callpost-docs-'));
  symlinkSync(fileURLToPath(new URL('../node_modules', import.meta.url)), join(dir, 'node_modules'), 'dir');
  return dir;
}

for (const block of blocks.filter((b) => HANDLED_HERE.has(b.lang))) {
  const fragment = block.options.includes('fragment');
  test(`${block.where} ${fragment ? 'parses' : 'runs'}`, async () => {
    const dir = workdir();
    try {
      const file = join(dir, 'example.mjs');
      writeFileSync(file, block.code);
      const refusedBefore = refused.length;
      const env = {
        ...process.env,
        WRITE_KEY,
        RELAY_URL: server.url,
        WEBHOOK_URL: `${server.url}/hook`,
        WEBHOOK_SECRET,
      };
      const { code, signal, output } = await node(fragment ? ['--check', file] : [file], dir, env);
      assert.equal(code, 0, `${block.where} exited ${code ?? signal}:\n${output}`);
      assert.deepEqual(refused.slice(refusedBefore), [], `${block.where}: the local server refused what it sent`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
