import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import handle from './web.mjs';

const app = new Hono();
app.post('/hook', (c) => handle(c.req.raw));
serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) => console.log(info.port));
