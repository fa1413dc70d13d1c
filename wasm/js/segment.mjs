// Node (import 'callpost/segment'): the same module as require('callpost/segment').
import api from './segment.cjs';

export const { Analytics, Context, SEGMENT_DEFAULTS, VERSION, init } = api;
export default api;
