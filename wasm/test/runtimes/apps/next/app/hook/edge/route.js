// The same route handler on the edge runtime (the `edge-light` condition, as
// on Vercel's edge).
import { Receiver, webhookHandler } from 'callpost/verify';

export const runtime = 'edge';
export const POST = webhookHandler(new Receiver('whsec-runtimes'), (hook) => Response.json({ processed: hook.ids }));
