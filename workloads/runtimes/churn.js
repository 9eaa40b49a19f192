// A JavaScript workload that keeps compiling new code, for measuring profd over a long run:
// every round makes a function of a new name, runs it until V8 optimises it, and drops it,
// so that the perf map grows without end and V8 reuses the code space of the functions it
// collected. Runs until killed.
'use strict';

let round = 0;

function tick() {
  const name = 'hot_' + round++;
  const make = new Function(`return function ${name}(n) {
    let s = 0;
    for (let i = 0; i < n; i++) s = (s * 31 + i) | 0;
    return s;
  }`);
  const f = make();
  let s = 0;
  for (let k = 0; k < 200; k++) s ^= f(20000);
  if (s === 42) console.log(s); // keeps the result live
  setImmediate(tick);
}

tick();
