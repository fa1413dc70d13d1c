import handle from './web.mjs';

Deno.serve({ hostname: '127.0.0.1', port: 0, onListen: ({ port }) => console.log(port) }, handle);
