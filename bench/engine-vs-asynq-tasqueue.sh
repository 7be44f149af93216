#!/usr/bin/env bash
# Side by side on Redis, in one run on this machine: `tranche --broker redis://… bench
# engine` against two Go job queues on Redis, asynq (bench/peers/asynq) and Tasqueue
# (bench/peers/tasqueue), on the same workload: N no-op jobs enqueued, then processed.
#
#   bench/engine-vs-asynq-tasqueue.sh              # N = 200,000
#   JOBS=100000 bench/engine-vs-asynq-tasqueue.sh
#
# WORKERS (default 10) and ENQUEUERS (default 4) set the peers' concurrency and
# enqueueing goroutines (100 workers were no faster than 10 here, 50,000 jobs: asynq
# fetches one task per Dequeue call from one loop, Tasqueue has one BLPOP consumer per
# queue). Tranche runs with its bench defaults on Redis (2,048 jobs in flight, reserve
# batches of 1,024, enqueue calls of 2,000 jobs with 4 in flight).
#
# One fresh redis-server on a free 127.0.0.1 port (temp dir, no RDB, no AOF), FLUSHALL
# before every run. Runs, in order:
#   1. tranche bench engine --jobs N
#   2. tranche bench engine --jobs N/4 --chain-length 4   (N jobs in chains of 4)
#   3. asynq, N tasks        4. Tasqueue, N jobs
#   5. tranche bench engine --jobs N --processes 2   (two worker processes)
# Redis memory per job = (used_memory after the enqueue phase - before) / N. The peers
# read INFO memory themselves between their phases. `tranche bench engine` has no flag
# for it, so this script reads its progress on stderr and, on the line that reports the
# last enqueue ("enqueued: N/N"), reads INFO memory at once (the worker starts a few
# milliseconds later; its first reserves only move ids between keys).
#
# Prints each JSON result and a Markdown table (stdout); progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-200000}
workers=${WORKERS:-10}
enqueuers=${ENQUEUERS:-4}
log() { echo "engine-vs-asynq-tasqueue: $*" >&2; }

command -v redis-server >/dev/null || { log "needs redis-server (apt-get install -y redis-server)"; exit 1; }
command -v go >/dev/null || { log "needs Go"; exit 1; }

tmp=$(mktemp -d -t engine-vs-asynq.XXXXXX)
cleanup() {
    if [ -f "$tmp/redis.pid" ]; then kill "$(cat "$tmp/redis.pid")" 2>/dev/null || true; fi
    sleep 0.2
    rm -rf "$tmp"
}
trap cleanup EXIT

machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "machine: $machine; load average $load_before"

log "building tranche (release) and the peers"
cargo build --release -q -p tranche
tranche="${CARGO_TARGET_DIR:-$root/target}/release/tranche"
(cd bench/peers/asynq && go build -o "$tmp/asynq-bench" .)
(cd bench/peers/tasqueue && go build -o "$tmp/tasqueue-bench" .)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --dir "$tmp" --save '' --appendonly no \
    --daemonize yes --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis_version=$(redis-cli -p "$port" info server | awk -F: '/^redis_version/{print $2}' | tr -d '\r')
log "redis $redis_version on 127.0.0.1:$port"
flush() { redis-cli -p "$port" flushall >/dev/null; }

# Runs tranche bench engine with the given arguments; prints its JSON report with the
# Redis memory readings added.
tranche_bench() {
    flush
    python3 - "$port" "$tranche" --broker "redis://127.0.0.1:$port" bench engine --json "$@" <<'PY'
import json, re, socket, subprocess, sys

port, argv = int(sys.argv[1]), sys.argv[2:]

def used_memory():
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"INFO memory\r\n")
        data = b""
        while True:
            data += s.recv(65536)
            head, _, body = data.partition(b"\r\n")
            if head.startswith(b"$") and len(body) >= int(head[1:]):
                break
    return int(re.search(rb"^used_memory:(\d+)", body, re.M).group(1))

before = used_memory()
after_enqueue = None
p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    m = re.search(r"enqueued: (\d+)/(\d+)", line)
    if m and m.group(1) == m.group(2) and after_enqueue is None:
        after_enqueue = used_memory()
    sys.stderr.write(line)
out = p.stdout.read()
if p.wait() != 0:
    sys.exit(f"tranche exited with {p.returncode}")
r = json.loads(out)
r["redis_used_memory_before"] = before
r["redis_used_memory_after_enqueue"] = after_enqueue
r["redis_used_memory_after_process"] = used_memory()
r["redis_bytes_per_job"] = (after_enqueue - before) / r["jobs"] if after_enqueue else None
print(json.dumps(r))
PY
}

log "1/4 tranche bench engine --jobs $jobs"
t_single=$(tranche_bench --jobs "$jobs")
log "2/4 tranche bench engine --jobs $((jobs / 4)) --chain-length 4"
t_chain=$(tranche_bench --jobs "$((jobs / 4))" --chain-length 4)
log "3/4 asynq"
flush
asynq=$("$tmp/asynq-bench" -redis "127.0.0.1:$port" -jobs "$jobs" -workers "$workers" -enqueuers "$enqueuers")
log "4/4 tasqueue"
flush
tasqueue=$("$tmp/tasqueue-bench" -redis "127.0.0.1:$port" -jobs "$jobs" -workers "$workers" -enqueuers "$enqueuers")

log "5/5 tranche bench engine --jobs $jobs --processes 2 (two worker processes)"
t_two=$(tranche_bench --jobs "$jobs" --processes 2)

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$t_single"
echo "$t_chain"
echo "$asynq"
echo "$tasqueue"
echo "$t_two"

python3 - "$machine; load average (1, 5, 15 min) $load_before before, $load_after after" "$redis_version" "$t_single" "$t_chain" "$asynq" "$tasqueue" "$t_two" <<'PY'
import json, sys
machine, redis_version = sys.argv[1:3]
t, tc, a, q, t2 = (json.loads(x) for x in sys.argv[3:8])
base = t["end_to_end_jobs_per_sec"]
rows = [
    ("Tranche (Redis backend), single jobs", t["jobs"], t["enqueue_jobs_per_sec"], t["process_jobs_per_sec"],
     t["end_to_end_jobs_per_sec"], t["latency_p99_ms"], t["redis_bytes_per_job"]),
    (f"Tranche (Redis backend), {tc['chains']:,} chains of {tc['chain_length']}", tc["jobs"], tc["enqueue_jobs_per_sec"],
     tc["process_jobs_per_sec"], tc["end_to_end_jobs_per_sec"], tc["latency_p99_ms"], tc["redis_bytes_per_job"]),
    ("Tranche (Redis backend), single jobs, 2 worker processes", t2["jobs"], t2["enqueue_jobs_per_sec"],
     t2["process_jobs_per_sec"], t2["end_to_end_jobs_per_sec"], t2["latency_p99_ms"], t2["redis_bytes_per_job"]),
]
for r in (a, q):
    name = {"asynq": "asynq", "tasqueue": "Tasqueue"}[r["peer"]]
    rows.append((f"{name} {r['version']}, {r['workers']} workers, {r['enqueuers']} enqueuers", r["jobs"],
                 r["enqueue_per_sec"], r["process_per_sec"], r["end_to_end_per_sec"], r["p99_ms"], r["redis_bytes_per_job"]))
print(f"\nRedis {redis_version}, loopback, no persistence; machine: {machine}\n")
print("| peer | jobs | enqueue/s | process/s | end-to-end/s | p99 ms | Redis bytes/job (queued) | end-to-end vs Tranche single jobs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for name, n, e, p, ee, p99, bpj in rows:
    bpj = f"{bpj:,.0f}" if bpj is not None else "n/a"
    print(f"| {name} | {n:,} | {e:,.0f} | {p:,.0f} | {ee:,.0f} | {p99:,.0f} | {bpj} | {ee / base:.2f}× |")
print("\np99: Tranche runnable→done (result committed; with worker processes, the highest of")
print("their own p99s); peers enqueue→handler.")
for r in (a, q):
    print(f"Tranche single jobs / {r['peer']}: {base / r['end_to_end_per_sec']:.2f}× end to end")
PY
