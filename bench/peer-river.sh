#!/usr/bin/env bash
# Peer benchmark: River (Go job queue on PostgreSQL) on the same workload as
# `tranche bench engine` — N no-op jobs enqueued, then processed.
#
#   bench/peer-river.sh                 # 100,000 jobs, River's defaults, 100 workers
#   JOBS=20000 bench/peer-river.sh
#   RIVER_TUNED=1 bench/peer-river.sh   # River's own `river bench` settings:
#                                       # 2,000 workers, fetch cooldown 2ms, poll 20ms
#
# WORKERS, FETCH_COOLDOWN and FETCH_POLL_INTERVAL (Go durations) override
# either profile. River's defaults (cooldown 100ms) cap it near
# WORKERS / 100ms = 1,000 jobs/s with 100 workers, whatever the hardware.
#
# Installs Debian's PostgreSQL if missing, runs a throwaway cluster in a temp
# dir on a free 127.0.0.1 port (default settings: fsync and synchronous_commit
# on), builds bench/peers/river and prints its one JSON result line on stdout.
# Everything else goes to stderr. The cluster is stopped and removed on exit.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jobs=${JOBS:-100000}
if [ "${RIVER_TUNED:-0}" = 1 ]; then
    workers=${WORKERS:-2000} cooldown=${FETCH_COOLDOWN:-2ms} poll=${FETCH_POLL_INTERVAL:-20ms}
else
    workers=${WORKERS:-100} cooldown=${FETCH_COOLDOWN:-100ms} poll=${FETCH_POLL_INTERVAL:-1s}
fi

log() { echo "peer-river: $*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    log "installing postgresql"
    as_root apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
pgbin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n1)")

# initdb refuses to run as root: run the server as `postgres` then.
if [ "$(id -u)" -eq 0 ]; then
    as_pg() { runuser -u postgres -- "$@"; }
else
    as_pg() { "$@"; }
fi

tmp=$(mktemp -d -t peer-river.XXXXXX)
pgdata=$tmp/data
cleanup() {
    if [ -f "$pgdata/postmaster.pid" ]; then
        as_pg "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$tmp"; fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$tmp/postgres.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $tmp" start >/dev/null
log "postgres $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $pgdata"
as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres river_bench

log "building bench/peers/river"
(cd "$here/peers/river" && go build -o "$tmp/river-bench" .) >&2

"$tmp/river-bench" \
    -dsn "postgres://postgres@127.0.0.1:$port/river_bench?sslmode=disable" \
    -jobs "$jobs" -workers "$workers" -fetch-cooldown "$cooldown" -fetch-poll-interval "$poll"
