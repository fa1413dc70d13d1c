// Plain node:http with the Node middleware (CommonJS).
const http = require('node:http');
const { nodeMiddleware } = require('callpost/verify');

const verify = nodeMiddleware({ secrets: 'whsec-runtimes' });
const server = http.createServer((req, res) => verify(req, res, () => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ processed: req.webhook.ids }));
}));
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
