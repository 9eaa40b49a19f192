#!/usr/bin/env bash
# The main job, for now: the offline reestimator on a bundled example (real llc-14 code of a
# loop with branches, sampled with perf; see examples/reestimate/). The daemon demo replaces
# this once the daemon exists.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out/demo
echo "== reestimate examples/reestimate/score.json (Graphviz CFGs in out/demo/dot)"
bin/reestimate --format text --dot out/demo/dot examples/reestimate/score.json
