#!/usr/bin/env bash
# The fleet's packaging: `tranche bench ach --processes 2` on a Redis and a PostgreSQL
# this script starts on free loopback ports in a temp dir (PostgreSQL's default
# configuration, fsync on, with PG_CONF's settings over it), both fresh for every run,
# with the CPU that PostgreSQL, Redis and the whole machine spent during the packaging
# (from /proc) and the steal.
# No peer packages on a fleet, but the host's speed drifts threefold from day to day, so
# before every run moov-io/ach (the yardstick in $PEERS/ach-moov, built with Go) writes
# the same number of entries into files of 25,000 on both cores, and each line shows the
# packaging's time as a multiple of moov's: the issue's 10 s was set when moov took
# 0.83-0.93 s here, so <= 10.8x meets it whatever the day's host (CALIBRATE=0 skips).
# To compare two builds of Tranche, give both: runs alternate.
#
#   bench/ach-fleet.sh                                  # 1,000,000 entries, 3 runs
#   ENTRIES=200000 RUNS=2 bench/ach-fleet.sh target/release/tranche /tmp/tranche-old
#   PG_CONF="shared_buffers=1GB" bench/ach-fleet.sh     # PostgreSQL settings, as -c
#
# Needs redis-server and PostgreSQL's initdb/pg_ctl (Debian's postgresql package); as
# root, PostgreSQL runs as the `postgres` user. Prints one line per run (stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
entries=${ENTRIES:-1000000}
runs=${RUNS:-3}
pg_conf=""
for setting in ${PG_CONF:-}; do pg_conf="$pg_conf -c $setting"; done
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/tranche)
peers=${PEERS:-$(pwd)/../shared/peers}
calibrate=${CALIBRATE:-1}
pgbin=$(dirname "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
work=$(mktemp -d)
chmod 755 "$work"
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$1"; else sh -c "$1"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stop() {
    [ -n "${rport:-}" ] && redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
    [ -d "$work/pg" ] && as_pg "$pgbin/pg_ctl -D $work/pg -m immediate stop" >/dev/null 2>&1 || true
}
trap 'stop; rm -rf "$work"' EXIT
if [ "$calibrate" = 1 ]; then
    command -v go >/dev/null && [ -d "$peers/ach-moov" ] || {
        echo "ach-fleet: the calibration needs Go and $peers/ach-moov (set PEERS, or CALIBRATE=0)" >&2; exit 1; }
    (cd "$peers/ach-moov" && go build -o "$work/achgen" .)
fi
# Seconds moov-io/ach takes to write the run's entries on both cores, or "" without it.
moov_seconds() {
    [ "$calibrate" = 1 ] || return 0
    rm -rf "$work/moov"; mkdir "$work/moov"
    "$work/achgen" -n "$entries" -per 25000 -workers 2 -out "$work/moov" | grep -oE 'wall=[0-9.]+' | cut -d= -f2
    rm -rf "$work/moov"
}
cpu() { awk '/^cpu /{print ($2+$3+$4+$7+$8)/100, $9/100}' /proc/stat; }
# The postmaster with its reaped backends (cutime, cstime) and the live backends.
pgcpu() { local main; main=$(head -1 "$work/pg/postmaster.pid")
    { awk '{print $14+$15+$16+$17}' "/proc/$main/stat"
      for p in $(pgrep -P "$main"); do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done
    } | awk '{s+=$1} END {print s/100}'; }

for run in $(seq 1 "$runs"); do
    for bin in "${bins[@]}"; do
        stop; rm -rf "$work/pg" "$work/day"
        moov=$(moov_seconds)
        rport=$(free_port); pport=$(free_port)
        redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --daemonize yes \
            --dir "$work" >/dev/null
        mkdir "$work/pg"; [ "$(id -u)" -eq 0 ] && chown postgres "$work/pg"
        as_pg "$pgbin/initdb -D $work/pg -U tranche --auth=trust >/dev/null && \
            $pgbin/pg_ctl -D $work/pg -o '-p $pport -k $work/pg -c listen_addresses=127.0.0.1$pg_conf' \
            -l $work/pg/log start -w >/dev/null"
        psql -q -h 127.0.0.1 -p "$pport" -U tranche -d postgres -c "CREATE DATABASE ledger"
        log="$work/err"
        "$bin" --broker "redis://127.0.0.1:$rport" --ledger "postgres://tranche@127.0.0.1:$pport/ledger" \
            bench ach --entries "$entries" --processes 2 --dir "$work/day" >/dev/null 2>"$log" &
        bench=$!
        until grep -q '^packaging' "$log"; do kill -0 $bench 2>/dev/null || break; sleep 0.1; done
        read -r busy0 steal0 <<<"$(cpu)"; pg0=$(pgcpu)
        until grep -q 'entries into' "$log"; do kill -0 $bench 2>/dev/null || break; sleep 0.1; done
        read -r busy1 steal1 <<<"$(cpu)"; pg1=$(pgcpu)
        wait $bench || { echo "$bin failed:" >&2; tail -20 "$log" >&2; exit 1; }
        packaged=$(grep -oE '[0-9]+ entries into [0-9]+ files in [0-9.]+ s' "$log")
        seconds=$(grep -oE '[0-9.]+ s$' <<<"$packaged" | cut -d' ' -f1)
        printf '%s%s run %s: %s; busy CPU %.1f s, PostgreSQL CPU %.1f s, steal %.1f s%s\n' \
            "$bin" "${PG_CONF:+ ($PG_CONF)}" "$run" "$packaged" "$(echo "$busy1-$busy0" | bc)" \
            "$(echo "$pg1-$pg0" | bc)" "$(echo "$steal1-$steal0" | bc)" \
            "${moov:+; moov-io/ach wrote them in $moov s on both cores just before: $(echo "scale=1; $seconds/$moov" | bc)x}"
    done
done
