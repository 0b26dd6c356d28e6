#!/usr/bin/env bash
# run.sh [lik arguments] — sets up lik on a fresh machine (scripts/setup.sh)
# and runs the main job.  With arguments: `lik ARGS`.  Without: `lik`, which
# retrieves with exact MaxSim on the embedded Cranfield collection and prints
# results + nDCG@10, then the same retrieval through a PLAID index (`lik
# index` builds one, nbits 2, in a temporary folder; `lik search` searches it
# with fast-plaid's defaults) and the two side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -gt 0 ]; then
  exec .venv/bin/lik "$@"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/lik | tee "$tmp/exact.txt"
echo
echo "== PLAID index of the same documents (lik index / lik search) =="
.venv/bin/lik index "$tmp/cranfield-plaid" | tee "$tmp/index.txt"
.venv/bin/lik search --print 1 "$tmp/cranfield-plaid" | tee "$tmp/plaid.txt"
# method | nDCG@10 | recall@100 | queries/s, from the two reports
metrics() { # file -> "ndcg recall qps"
  awk '/^nDCG@10/ {n=$2; r=$4} /queries\/s/ {for (i=1;i<=NF;i++) if ($i ~ /^queries\/s/) q=$(i-1)}
       END {print n, r, q}' "$1"
}
read -r en er eq <<<"$(metrics "$tmp/exact.txt")"
read -r pn pr pq <<<"$(metrics "$tmp/plaid.txt")"
echo
echo "Cranfield-1400, 225 queries            nDCG@10  recall@100  queries/s"
printf '%-38s %7s  %10s  %9s\n' "exact MaxSim (lik)" "$en" "$er" "$eq"
printf '%-38s %7s  %10s  %9s\n' "PLAID index, nbits 2 (lik search)" "$pn" "$pr" "$pq"
