#!/usr/bin/env bash
# run.sh [lik arguments] — sets up lik on a fresh machine (scripts/setup.sh)
# and runs the main job: `lik`, which with no arguments retrieves with exact
# MaxSim on the embedded Cranfield collection and prints results + nDCG@10.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/lik "$@"
