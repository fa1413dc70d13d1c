import Fastify from 'fastify';
import { Receiver, refusal } from 'callpost/verify';

const receiver = new Receiver('whsec-runtimes');
const app = Fastify();
// Keep the raw bytes: the signature covers them, not a re-serialized object.
app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => done(null, body));
app.post('/hook', async (request, reply) => {
  let hook;
  try {
    hook = await receiver.receive(request.body, request.headers);
  } catch (e) {
    const { status, body } = refusal(e);
    return reply.code(status).send(body);
  }
  if (hook.onlyDuplicates) return reply.code(200).send({ duplicates: hook.duplicates.length });
  try {
    return { processed: hook.ids };
  } catch (e) {
    await receiver.failed(hook);
    throw e;
  }
});
await app.listen({ host: '127.0.0.1', port: 0 });
console.log(app.server.address().port);
