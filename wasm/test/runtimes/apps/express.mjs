import express from 'express';
import { nodeMiddleware } from 'callpost/verify';

const app = express();
// No express.json() on this route: the middleware reads the raw body.
app.post('/hook', nodeMiddleware({ secrets: 'whsec-runtimes' }), (req, res) => {
  res.json({ processed: req.webhook.ids });
});
const server = app.listen(0, '127.0.0.1', () => console.log(server.address().port));
