#!/usr/bin/env bash
# Two builds of tranche, alternated in the same minutes (A B B A …), on the engine and on
# contract notes: what a refactor or a feature costs the bulk path. This machine is
# noisy; compare pairs, not single runs.
#
#   bench/before-after.sh BEFORE_BIN AFTER_BIN            # 3 pairs of each bench
#   PAIRS=5 JOBS=1000000 CLIENTS=1000 bench/before-after.sh old/tranche target/release/tranche
#
# Benches: `bench engine --jobs $JOBS` on the embedded backend, the same on a Redis
# started here (redis-server on a free port, skipped when it is not installed), and
# `bench notes --clients $CLIENTS` mailing to postfix's smtp-sink when installed (to the
# outbox otherwise). Prints one line per run: bench, build, figure.
set -euo pipefail
before=$1 after=$2
pairs=${PAIRS:-3} jobs=${JOBS:-1000000} clients=${CLIENTS:-1000}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

broker=
if command -v redis-server >/dev/null; then
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >/dev/null &
    pids+=($!)
    broker=redis://127.0.0.1:$port
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
smtp=
if [ -x /usr/sbin/smtp-sink ]; then
    port=$(free_port)
    # As root it must drop to another user.
    /usr/sbin/smtp-sink $([ "$EUID" = 0 ] && echo -u nobody) "127.0.0.1:$port" 1000 >/dev/null 2>&1 &
    pids+=($!)
    smtp=smtp://127.0.0.1:$port
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
fi

engine() { # BIN LABEL [--broker URL]
    rm -rf "$dir/data"
    local out
    out=$("$1" bench engine --data "$dir/data" --jobs "$jobs" "${@:3}" 2>&1)
    echo "engine${3:+ redis} $2 $(echo "$out" | grep '^end to end' | awk '{print $4, $5}')"
}
notes() { # BIN LABEL
    local out args=(bench notes --clients "$clients" --data "$dir/notes")
    rm -rf "$dir/notes"
    [ -n "$smtp" ] && args+=(--smtp "$smtp")
    out=$("$1" "${args[@]}" 2>&1)
    echo "notes $2 $(echo "$out" | grep -m1 -o '[0-9.]* notes/s' | head -1)"
}

for i in $(seq "$pairs"); do
    # A B then B A, so that drift in the machine's load falls on both builds alike.
    if [ $((i % 2)) = 1 ]; then order=("$before before" "$after after"); else order=("$after after" "$before before"); fi
    for entry in "${order[@]}"; do
        read -r bin label <<<"$entry"
        engine "$bin" "$label"
        [ -n "$broker" ] && engine "$bin" "$label" --broker "$broker" --prefix "{bench$i$label}:"
        notes "$bin" "$label"
    done
done
