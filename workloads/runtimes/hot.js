// A CPU-bound JavaScript workload for profd's tests: three functions of different cost,
// called in a loop for the seconds of CPU time given (default 3; node's, so a busy machine
// takes longer and is sampled as often as an idle one). V8 compiles them with its
// optimising JIT; node --perf-basic-prof or --perf-prof tells perf (and profd) their names.
// Each function runs 25 times in a row: one call takes about a millisecond, and a program
// that moved from one to the next every millisecond or so would keep step with a sampler
// firing every 1.001 ms (999 Hz), which then sees mostly one phase of it, and two samplers
// started apart see different ones.
'use strict';

function mixInts(n) {
  let h = 0x12345678;
  for (let i = 0; i < n; i++) {
    h = Math.imul(h ^ i, 0x9e3779b1) >>> 0;
    h ^= h >>> 15;
  }
  return h;
}

function sumSquares(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s += (i % 7) * (i % 11);
  }
  return s;
}

// byValue is small enough that V8 spends much of each call before it has set the frame
// pointer or after it has torn it down, where a walk by frame pointers skips its caller.
const byValue = (x, y) => x - y;

function sortChunk(n) {
  const a = new Array(n);
  for (let i = 0; i < n; i++) a[i] = (i * 7919) % n;
  a.sort(byValue);
  return a[n >> 1];
}

function run(seconds) {
  const endUs = process.cpuUsage().user + seconds * 1e6;
  let acc = 0;
  while (process.cpuUsage().user < endUs) {
    for (let k = 0; k < 25; k++) acc ^= mixInts(300000);
    for (let k = 0; k < 25; k++) acc ^= sumSquares(150000);
    for (let k = 0; k < 25; k++) acc ^= sortChunk(2000);
  }
  console.log('done', acc);
}

// hot.js SECONDS wait: print "waiting" and start once a byte comes on stdin, so that
// profilers attached one after the other see the same span.
const seconds = Number(process.argv[2] || 3);
if (process.argv[3] === 'wait') {
  console.log('waiting');
  process.stdin.once('data', () => {
    process.stdin.destroy();
    run(seconds);
  });
} else {
  run(seconds);
}
