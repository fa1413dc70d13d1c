// Reads cases written by node_corpus.rs, one JSON array per line:
//   [ours, program]
// `ours` is callpost's output; `program` rebuilds the same value in JS without
// going through any JSON text (numbers as IEEE-754 bit patterns, strings as
// UTF-8 hex), so JS's own JSON.stringify is an independent oracle.
import { readFileSync } from 'node:fs';

const bits = new DataView(new ArrayBuffer(8));
function build(p) {
  switch (p[0]) {
    case 'n': return null;
    case 'b': return p[1];
    case 'd': bits.setBigUint64(0, BigInt('0x' + p[1])); return bits.getFloat64(0);
    case 's': return Buffer.from(p[1], 'hex').toString('utf8');
    case 'a': return p[1].map(build);
    case 'o': { const o = {}; for (const [k, v] of p[1]) o[Buffer.from(k, 'hex').toString('utf8')] = build(v); return o; }
    default: throw new Error('bad program ' + p[0]);
  }
}

const lines = readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
let bad = 0;
for (const [i, line] of lines.entries()) {
  const [ours, program] = JSON.parse(line);
  const fromJs = JSON.stringify(build(program));
  const reparsed = JSON.stringify(JSON.parse(ours));
  if (ours !== fromJs || ours !== reparsed) {
    if (bad++ < 5) console.error(`case ${i}:\n ours     ${ours}\n built    ${fromJs}\n reparsed ${reparsed}`);
  }
}
console.log(`checked ${lines.length} mismatched ${bad}`);
process.exit(bad ? 1 : 0);
