#!/usr/bin/env bash
# The main job. Grows with the daemon; for now it runs the offline reestimator on an example.
set -euo pipefail
echo "profd demo: the daemon is not built yet; see README.md (Status)." >&2
exit 1
