// Node (import 'callpost/client'): the same module as require('callpost/client').
import api from './client.cjs';

export const { Client, Batcher, stringify, parseTimestamp, DEFAULTS, VERSION, MAX_MESSAGE_BYTES, init } = api;
export default api;
