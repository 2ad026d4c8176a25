// sampler.js — Node's spawnSync as a reference for make bench: each line
// read on stdin runs `node sampler.js BIN`'s BIN once with spawnSync (output
// captured, as a TypeScript runtime would) and answers
// "<microseconds> <status>\n". See bench/sampler.c for the protocol.
'use strict';
const { spawnSync } = require('child_process');
const readline = require('readline');

const bin = process.argv[2] || '/bin/true';
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', () => {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(bin, [], { env: {} });
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  process.stdout.write(`${us.toFixed(1)} ${r.status}\n`);
});
