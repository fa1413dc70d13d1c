// The benchmark's webhook receiver: Node's http server, verifying every
// request's X-Signature with callpost's verifyRequest, counting what
// arrives. GET /count answers {"received", "verified", "bad"}.
//   node receiver.mjs <port> <shared secret>     (port 0 picks one; the
//   first line on stdout is the port)
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { verifyRequest } = require('callpost');
const [port = '0', secret = 'bench-secret'] = process.argv.slice(2);
const count = { received: 0, verified: 0, bad: 0 };

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(count));
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    count.received++;
    if (verifyRequest(new Uint8Array(body.buffer, body.byteOffset, body.length), req.headers, secret)) count.verified++;
    else count.bad++;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1', () => console.log(server.address().port));
