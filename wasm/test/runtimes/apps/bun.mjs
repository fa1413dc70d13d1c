import handle from './web.mjs';

const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: handle });
console.log(server.port);
