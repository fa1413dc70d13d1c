// Plain node:http with the Node middleware (ESM).
import http from 'node:http';
import { nodeMiddleware } from 'callpost/verify';

const verify = nodeMiddleware({ secrets: 'whsec-runtimes' });
const server = http.createServer((req, res) => verify(req, res, () => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ processed: req.webhook.ids }));
}));
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
