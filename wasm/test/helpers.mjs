// Real HTTP(S) servers on 127.0.0.1 and the shared vectors.
import { readFileSync, mkdtempSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The installed package's directory, and its files that the exports map
// does not list (the wasm modules' glue, api.cjs).
const require = createRequire(import.meta.url);
export const pkgDir = join(require.resolve('callpost/package.json'), '..');
export const pkgRequire = (file) => require(join(pkgDir, file));
export const pkgSize = (file) => statSync(join(pkgDir, file)).size;

// The files a Node process loads for `require(entry)`: a fresh process, so
// the test file's own imports do not count.
export function loadedBy(entry) {
  const script = `require(${JSON.stringify(entry)}); console.log(JSON.stringify(Object.keys(require.cache)))`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: pkgDir }).toString());
}

export const vectors = (name) => JSON.parse(readFileSync(new URL(`../../testdata/${name}`, import.meta.url), 'utf8'));

/** handler(n, req, body) -> [status, headers, body] | 'hang' | 'close' */
export async function serve(handler, tls) {
  const received = [];
  let n = 0;
  const onRequest = (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      received.push({ path: req.url, headers: req.headers, body: body.toString('utf8') });
      const r = await handler(n++, req, body);
      if (r === 'hang') return;
      if (r === 'close') return req.socket.destroy();
      const [status, headers = {}, reply = ''] = r;
      res.writeHead(status, headers);
      res.end(reply);
    });
  };
  const server = tls ? createHttpsServer(tls, onRequest) : createServer(onRequest);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${server.address().port}`;
  return { url, received, close: () => { server.closeAllConnections?.(); server.close(); } };
}

export const ok = () => [200, {}, 'ok'];

export function selfSigned() {
  const d = mkdtempSync(join(tmpdir(), 'callpost-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(d, 'key.pem'), '-out', join(d, 'cert.pem')], { stdio: 'ignore' });
  return { key: readFileSync(join(d, 'key.pem')), cert: readFileSync(join(d, 'cert.pem')) };
}
