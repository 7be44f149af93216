#!/usr/bin/env bash
# Side by side, in one run on this machine: Conductor OSS (Redis profile) and Tranche
# (embedded, then on Redis) under the same load, driven by the same program: the
# driver of ../shared/peers/conductor (Orkes' benchmark shape: a 13-step workflow with
# a one-step sub-workflow, no-op workers batch-polling 10 at a time with a 100 ms long
# poll, workflows started open loop at a fixed rate), unchanged. Then a start burst (no
# workers) on each. Prints each side's table and the ratios, for BENCHMARKS.md.
#
#   bench/workflows-vs-conductor.sh
#   CONDUCTOR_RATES="20 30" TRANCHE_RATES="250 500" REDIS_RATES="250" DURATION=60s \
#       bench/workflows-vs-conductor.sh
#   SKIP_CONDUCTOR=1 bench/workflows-vs-conductor.sh   # Tranche's side only
#   SKIP_CONDUCTOR=1 TRANCHE_BIN=/tmp/old/tranche bench/workflows-vs-conductor.sh  # A/B
#
# The peer's files are run where they are, never copied into this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
peer="${PEER:-$repo/../shared/peers/conductor}"
[ -x "$peer/run.sh" ] || { echo "no Conductor peer at $peer (set PEER=)" >&2; exit 2; }

conductor_rates=${CONDUCTOR_RATES:-"20 30"}
tranche_rates=${TRANCHE_RATES:-"250 500"}
redis_rates=${REDIS_RATES-"250"}  # empty: no Redis runs
warmup=${WARMUP:-15s}
duration=${DURATION:-60s}
drain=${DRAIN:-60s}
burst_n=${BURST_N:-5000}
port=${PORT:-7471}
redis_port=${REDIS_PORT:-6493}

out=$(mktemp -d -t workflows-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    rm -rf "$out/data"
}
trap cleanup EXIT
log() { echo "[workflows-vs-conductor $(date +%H:%M:%S)] $*" >&2; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB; commit $(git rev-parse --short HEAD)" >&2
# TRANCHE_BIN: a build of tranche to run instead of this checkout's (an A/B of two).
if [ -n "${TRANCHE_BIN:-}" ]; then
    bin=$TRANCHE_BIN
else
    cargo build --release -q -p tranche
    bin="${CARGO_TARGET_DIR:-$repo/target}/release/tranche"
fi
driver="${CACHE:-$HOME/.cache/tranche-peer}/bin/ltdriver"
mkdir -p "$(dirname "$driver")"
(cd "$peer/driver" && go build -o "$driver" .)

# The peer first: its run.sh starts Redis and a fresh JVM per rate, and a burst.
if [ "${SKIP_CONDUCTOR:-0}" != 1 ]; then
    log "Conductor OSS, Redis profile, rates [$conductor_rates]"
    (cd "$peer" && PROFILE=redis RATES="$conductor_rates" WARMUP="$warmup" DURATION="$duration" \
        DRAIN="$drain" BURST=1 BURST_N="$burst_n" OUT="$out/conductor.jsonl" ./run.sh >&2)
fi

# One Tranche server per rate, fresh state each time, as the peer gets.
serve() { # $1: label, then the server's global options
    local label=$1; shift
    rm -rf "$out/data"
    "$bin" "$@" server --listen "127.0.0.1:$port" --max-connections 4096 >"$out/server.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    for _ in $(seq 100); do
        curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$driver" -base "http://127.0.0.1:$port/api" -mode register \
        -taskdefs "$peer/conductor/taskdefs.json" -workflows "$peer/conductor/workflows.json" >/dev/null
    log "$label up (pid $server_pid)"
}
stop() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}
run_rates() { # $1: label, $2: rates, $3: extra procs, then the server's options
    local label=$1 rates=$2 extra=$3; shift 3
    for r in $rates; do
        serve "$label" "$@"
        log "$label: $r workflows/s"
        "$driver" -base "http://127.0.0.1:$port/api" -rate "$r" -warmup "$warmup" -duration "$duration" \
            -drain "$drain" -procs "tranche=$server_pid$extra" -label "$label" -out "$out/tranche.jsonl" >&2
        stop
    done
    serve "$label" "$@"
    log "$label: start burst"
    "$driver" -base "http://127.0.0.1:$port/api" -mode burst -burst-n "$burst_n" -burst-c 64 \
        -label "$label burst" -out "$out/tranche.jsonl" >&2
    stop
}

run_rates "tranche embedded" "$tranche_rates" "" --data "$out/data"

if [ -n "$redis_rates" ]; then
    redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
        --dir "$out" --logfile "$out/redis.log" &
    redis_pid=$!
    pids+=("$redis_pid")
    for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    for r in $redis_rates; do
        redis-cli -p "$redis_port" flushall >/dev/null
        run_rates "tranche redis" "$r" ",redis=$redis_pid" --broker "redis://127.0.0.1:$redis_port"
    done
fi

echo
python3 "$peer/summarize.py" "$out"/*.jsonl
python3 - "$out" <<'PY'
import glob, json, sys
rows = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")) for l in open(f) if l.strip()]
def side(prefix, burst=False):
    return [r for r in rows if r["label"].startswith(prefix) and (r.get("mode") == "burst") == burst]
def clean(r):  # every started workflow completed, no errors
    return (r.get("starts_err_total", 0) == 0 and r.get("task_updates_err_total", 0) == 0
            and r.get("starts_dropped_total", 0) == 0)
def best(rs):
    ok = [r for r in rs if clean(r)]
    return max(ok, key=lambda r: r["wf_completed_per_s"]) if ok else None
cond = best(side("conductor"))
print()
for name in ("tranche embedded", "tranche redis"):
    t = best(side(name))
    if not t:
        continue
    cpu = t.get("cpu_cores_used", {})
    line = (f"{name}: {t['wf_completed_per_s']:.0f} workflows/s ({t['task_exec_per_s']:.0f} task executions/s), "
            f"start p99 {t['start_latency']['p99_ms']:.1f} ms, update p99 {t['task_update_latency']['p99_ms']:.1f} ms, "
            f"server {cpu.get('tranche', 0):.2f} cores, peak RSS {t['peak_rss_mib'].get('tranche', 0):.0f} MiB")
    if cond:
        line += f"; {t['wf_completed_per_s'] / cond['wf_completed_per_s']:.1f}x Conductor's {cond['wf_completed_per_s']:.1f}/s"
    print(line)
cb = side("conductor", True)
for name in ("tranche embedded", "tranche redis"):
    tb = side(name, True)
    if tb:
        line = f"{name} start burst: {tb[-1]['burst_starts_per_s']:.0f} starts/s"
        if cb:
            line += f"; {tb[-1]['burst_starts_per_s'] / cb[-1]['burst_starts_per_s']:.1f}x Conductor's {cb[-1]['burst_starts_per_s']:.0f}/s"
        print(line)
print(f"\nresults: {sys.argv[1]}/*.jsonl")
PY
