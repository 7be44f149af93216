#!/usr/bin/env bash
# Side by side, in one run on this machine: `tranche bench engine` (embedded SQLite)
# against River (Go, PostgreSQL; bench/peer-river.sh with River's own benchmark
# settings) on the same workload: N no-op jobs enqueued, then processed with all
# cores. Prints both JSON results and a Markdown table for BENCHMARKS.md.
#
#   bench/engine-vs-river.sh            # N = 1,000,000
#   JOBS=100000 bench/engine-vs-river.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-1000000}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB" >&2
cargo build --release -q -p tranche
t_normal=$(./target/release/tranche bench engine --jobs "$jobs" --json 2>/dev/null)
t_full=$(./target/release/tranche bench engine --jobs "$jobs" --full-sync --json 2>/dev/null)
river=$(RIVER_TUNED=1 JOBS="$jobs" bench/peer-river.sh)
echo "$t_normal"
echo "$t_full"
echo "$river"

python3 - "$t_normal" "$t_full" "$river" <<'PY'
import json, sys
t, tf, r = (json.loads(a) for a in sys.argv[1:4])
rows = [
    ("Tranche, SQLite synchronous=NORMAL", t["enqueue_jobs_per_sec"], t["process_jobs_per_sec"], t["end_to_end_jobs_per_sec"]),
    ("Tranche, SQLite synchronous=FULL (--full-sync)", tf["enqueue_jobs_per_sec"], tf["process_jobs_per_sec"], tf["end_to_end_jobs_per_sec"]),
    (f"River {r['version']}, PostgreSQL 15, {r['workers']} workers", r["insert_jobs_per_sec"], r["process_jobs_per_sec"], r["end_to_end_jobs_per_sec"]),
]
print(f"\n{t['jobs']:,} no-op jobs, {t['cores']} cores\n")
print("| engine | enqueue jobs/s | process jobs/s | end to end jobs/s | per core (e2e) |")
print("|---|---:|---:|---:|---:|")
for name, e, p, ee in rows:
    print(f"| {name} | {e:,.0f} | {p:,.0f} | {ee:,.0f} | {ee / t['cores']:,.0f} |")
print(f"\nTranche / River end to end: {t['end_to_end_jobs_per_sec'] / r['end_to_end_jobs_per_sec']:.1f}x "
      f"(full sync: {tf['end_to_end_jobs_per_sec'] / r['end_to_end_jobs_per_sec']:.1f}x)")
PY
