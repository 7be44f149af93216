#!/usr/bin/env bash
# Side by side in one run on this machine (issue 17, the order-state feed): Tranche's
# feed server loaded by its own emulators (`tranche feed emulate-core` and
# `emulate-clients`, in processes of their own) against the systems a user would pick
# instead, loaded by the peers' yardstick on the same load definitions:
#   - Tarantool 2.6 running the exchange pilot's own design ($PEERS/feed.lua:
#     current state in a space with {seq, rec} and {broker, seq, rec} indexes, one
#     transaction and one wake-up per batch, a fiber.cond per broker);
#   - Redis 7 Streams (a stream per broker for filtered readers, XREAD BLOCK);
#   - NATS 2.9 JetStream (a subject per order, MaxMsgsPerSubject=1, push consumers).
#
#   bench/feed-vs-peers.sh                   # every scenario, every peer (~15 min)
#   bench/feed-vs-peers.sh --quick           # a few seconds per scenario: a smoke test
#   bench/feed-vs-peers.sh --scenarios filtered,unfiltered --peers redis --duration 30
#   bench/feed-vs-peers.sh --help
#
# Scenarios (the issue's targets in brackets):
#   ingest      durable writes, highest rate [>= 300,000 writes/s]. Tranche: a fresh
#               `feed serve --durability every-write` (group commit, fsync before the
#               ack) per step of a ladder of open-loop rates (--ingest-rates), one core
#               over TCP (a batch per 1 ms tick, up to 8 batches in flight), no
#               clients; the ladder stops at the first rate the core cannot keep (it
#               falls 2 s behind or reaches < 95 %). Peers: the yardstick's write mode,
#               closed loop (batches of 100, 8 in flight) for --duration, in their
#               durable mode: Tarantool wal_mode=write, Redis AOF appendfsync everysec,
#               NATS file storage (with --strict-peers: Tarantool wal_mode=fsync, Redis
#               appendfsync always; NATS 2.9 has no per-write sync setting).
#   filtered    50 clients, one per firm/broker (50), at 10,000 writes/s [p99 <= 1 ms].
#               Tranche: 50 `--filtered` clients (one firm each) long-polling by cursor;
#               peers: `-mode latency -clients 50 -filter` (Tarantool's broker index
#               and condition per broker, Redis a stream per broker, NATS a filter
#               subject per broker).
#   unfiltered  50 clients following everything at 10,000 writes/s (500,000 rows/s
#               if every version were delivered) [p99 <= 5 ms]. Peers as above without
#               -filter (Redis with -redisblob: one field per entry, its fastest).
#   pilot       the pilot's shape, Tranche only: 2 shards, 100 filtered clients (one
#               per firm) and 2 unfiltered ones on a replica, a ladder of rates
#               (--pilot-rates), each for --pilot-duration (60 s), stopping at the first
#               rate that misses avg <= 1 ms, p99 <= 5 ms, 0 omissions, 0 reorderings,
#               <= 5 % empty answers [>= 100,000 writes/s, peak RSS reported]. The
#               shape is partial, and the output says how: the emulators address a
#               shard per --target, not the shards of one `feed serve --shards`, so each
#               shard is a server of its own, and with `feed serve --replica-of` each
#               has a replica that the 2 unfiltered clients read (without it, they read
#               the primaries). Peak RSS is the servers' sum, each one in the notes.
#
# Tranche's latency runs from an order version's stamp (made by the core) to the last
# byte of the page holding it; the yardstick's from the producer's stamp to the reply.
# Tranche delivers each order's latest version (a version superseded before a client
# read it is not timed, so fewer rows than events); the peers deliver every event.
# The yardstick drops its first --warm seconds; Tranche's figures cover the whole run,
# except versions stamped before their client's first poll (delivered and checked, not
# timed: the clients start once the core's run file appears).
# Tranche's clients check every view against the final state replayed from the core's
# seed (omissions, reorderings); the yardstick does not check ("n/c"). Peak RSS and
# CPU seconds are the servers' (for the pilot all of them, primaries and replicas), not
# the load generators'. Peers run in memory in the latency scenarios, as their
# yardstick's own figures were measured (--peers-durable runs them in their durable
# mode); Tranche runs with --durability (every-write).
#
# Everything listens on free 127.0.0.1 ports, with its data in one temporary directory;
# every server is started fresh per run and stopped on exit (also on ^C). Nothing is
# installed: what is missing is named with how to get it (--skip-missing runs the
# rest). The peers' yardstick is run where it is, never copied in: its Go load
# generator is built from its own go.mod and go.sum in $PEERS/feed-bench and Tarantool
# runs $PEERS/feed.lua (PEERS defaults to ../shared/peers beside the repository, as for
# bench/ach-vs-moov.sh). Progress goes to
# stderr; the table (Markdown) to stdout.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/feed-vs-peers.sh [OPTIONS]

Tranche's order-state feed against Tarantool (the pilot's design), Redis Streams and
NATS JetStream on the same loads, side by side; prints one Markdown table.

Options:
  --scenarios LIST      ingest,filtered,unfiltered,pilot (default: all)
  --peers LIST          tarantool,redis,nats or none (default: all three)
  --duration SECS       each ingest step and latency run (default 20)
  --pilot-duration SECS each pilot step (default 60)
  --warm SECS           the yardstick drops latency samples before this (default 3)
  --ingest-rates LIST   Tranche's ingest ladder, writes/s
                        (default 100000,200000,300000,400000,500000,600000,800000)
  --pilot-rates LIST    Tranche's pilot ladder, writes/s (default 50000,100000,150000,200000)
  --rate R              writes/s of the filtered and unfiltered scenarios (default 10000)
  --clients N           clients of the filtered and unfiltered scenarios (default 50)
  --pilot-shards K      shards of the pilot's shape (default 2)
  --transport tcp|http  Tranche's protocol (default tcp, the fast path)
  --durability MODE     Tranche's --durability (default every-write)
  --peers-durable       peers in their durable mode in every scenario (default: ingest only)
  --strict-peers        the peers' durable mode syncs every write: Tarantool
                        wal_mode=fsync, Redis appendfsync always (NATS: no such setting)
  --quick               smoke test: 3 s runs, warm 1 s, one ingest step (100000),
                        one pilot step (10000)
  --tranche PATH        the tranche binary (default: $TRANCHE_BIN, else target/release/tranche)
  --work-dir DIR        keep logs and reports in DIR (default: a temporary directory,
                        removed on exit)
  --skip-missing        run what is installed, skipping peers that are not
  -h, --help            this help

Needs: python3; for the peers their yardstick in PEERS (default ../shared/peers), Go, tarantool, redis-server,
nats-server (apt-get install -y tarantool redis-server nats-server).
EOF
}

caller_dir=$(pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
peers_dir=${PEERS:-$root/../shared/peers}
log() { echo "feed-vs-peers: $*" >&2; }
die() { log "$*"; exit 1; }

scenarios=ingest,filtered,unfiltered,pilot
peers=tarantool,redis,nats
duration=20
pilot_duration=60
warm=3
ingest_rates=100000,200000,300000,400000,500000,600000,800000
pilot_rates=50000,100000,150000,200000
rate=10000
clients=50
pilot_shards=2
one_sharded_server=0
transport=tcp
durability=every-write
peers_durable=0
strict_peers=0
quick=0
tranche=${TRANCHE_BIN:-$root/target/release/tranche}
work_dir=
skip_missing=0
declare -A given=()

while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
        -h|--help) usage; exit 0 ;;
        --quick) quick=1; shift; continue ;;
        --peers-durable) peers_durable=1; shift; continue ;;
        --strict-peers) strict_peers=1; shift; continue ;;
        --skip-missing) skip_missing=1; shift; continue ;;
    esac
    [ $# -ge 2 ] || die "$opt needs a value (see --help)"
    case $opt in
        --scenarios) scenarios=$2 ;;
        --peers) peers=$2 ;;
        --duration) duration=$2 ;;
        --pilot-duration) pilot_duration=$2 ;;
        --warm) warm=$2 ;;
        --ingest-rates) ingest_rates=$2 ;;
        --pilot-rates) pilot_rates=$2 ;;
        --rate) rate=$2 ;;
        --clients) clients=$2 ;;
        --pilot-shards) pilot_shards=$2 ;;
        --transport) transport=$2 ;;
        --durability) durability=$2 ;;
        --tranche) tranche=$2 ;;
        --work-dir) work_dir=$2 ;;
        *) die "unknown option $opt (see --help)" ;;
    esac
    given[$opt]=1
    shift 2
done

# Paths given relative to where the script was started from.
case $tranche in /*) ;; *) tranche=$caller_dir/$tranche ;; esac
case $work_dir in /*|'') ;; *) work_dir=$caller_dir/$work_dir ;; esac

# --quick changes only what was not given explicitly.
if [ "$quick" = 1 ]; then
    [ -n "${given[--duration]:-}" ] || duration=3
    [ -n "${given[--pilot-duration]:-}" ] || pilot_duration=3
    [ -n "${given[--warm]:-}" ] || warm=1
    [ -n "${given[--ingest-rates]:-}" ] || ingest_rates=100000
    [ -n "${given[--pilot-rates]:-}" ] || pilot_rates=10000
fi

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
for v in duration pilot_duration rate clients pilot_shards; do
    is_uint "${!v}" || die "--${v//_/-} must be a whole number above 0, got '${!v}'"
done
[[ $warm =~ ^[0-9]+$ ]] || die "--warm must be a whole number of seconds, got '$warm'"
[ "$warm" -lt "$duration" ] || die "--warm ($warm) must be shorter than --duration ($duration)"
for list in "$ingest_rates" "$pilot_rates"; do
    [[ $list =~ ^[0-9]+(,[0-9]+)*$ ]] || die "a rate list is whole numbers separated by commas, got '$list'"
done
case $transport in tcp|http) ;; *) die "--transport is tcp or http, got '$transport'" ;; esac

want() { [[ ",$1," == *",$2,"* ]]; }
for s in ${scenarios//,/ }; do
    case $s in ingest|filtered|unfiltered|pilot) ;; *) die "unknown scenario '$s' (ingest, filtered, unfiltered, pilot)" ;; esac
done
[ "$peers" = none ] && peers=
for p in ${peers//,/ }; do
    case $p in tarantool|redis|nats) ;; *) die "unknown peer '$p' (tarantool, redis, nats or none)" ;; esac
done

# What is missing, with how to get it; nothing is installed here.
missing=()
command -v python3 >/dev/null || missing+=("python3 (apt-get install -y python3): reads the reports")
if [ ! -x "$tranche" ]; then
    missing+=("the tranche binary at $tranche: build it with 'cargo build --release -p tranche' (or give --tranche PATH / TRANCHE_BIN)")
fi
[ ${#missing[@]} = 0 ] || { for m in "${missing[@]}"; do log "missing: $m"; done; exit 1; }
peer_missing() {
    case $1 in
        tarantool) command -v tarantool >/dev/null || echo "tarantool (apt-get install -y tarantool; Tarantool 2.6 here)" ;;
        redis) command -v redis-server >/dev/null || echo "redis-server (apt-get install -y redis-server)" ;;
        nats) command -v nats-server >/dev/null || echo "nats-server (apt-get install -y nats-server)" ;;
    esac
}
kept=
skipped=()
for p in ${peers//,/ }; do
    m=$(peer_missing "$p")
    if [ -z "$m" ] && ! command -v go >/dev/null; then
        m="Go, to build the yardstick from $peers_dir/feed-bench/go.mod (https://go.dev/dl/, the version go.mod names or newer)"
    fi
    if [ -n "$m" ]; then
        missing+=("$p needs $m")
        skipped+=("$p")
    else
        kept+=${kept:+,}$p
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    for m in "${missing[@]}"; do log "missing: $m"; done
    [ "$skip_missing" = 1 ] || die "install what is missing, or run with --skip-missing (or --peers LIST) to leave those peers out"
    log "--skip-missing: leaving out ${skipped[*]}"
fi
peers=$kept

if [ -n "$work_dir" ]; then
    mkdir -p "$work_dir"
    tmp=$(cd "$work_dir" && pwd)
    keep_tmp=1
else
    tmp=$(mktemp -d -t feed-vs-peers.XXXXXX)
    keep_tmp=0
fi
export TRANCHE_DATA="$tmp/tranche-data" # the CLI's global default; the feed does not use it

# Every process started here, stopped on exit by its PID.
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [ "$keep_tmp" = 1 ]; then log "logs and reports kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# bounded SECS CMD...: runs CMD with a time limit, in the background so that a signal
# to this script stops the run at once (its trap, then cleanup, which stops CMD too).
bounded() {
    local limit=$1 pid rc=0
    shift
    timeout "$limit" "$@" &
    pid=$!
    pids+=("$pid")
    wait "$pid" || rc=$?
    forget "$pid"
    return "$rc"
}
forget() { # forget PID: it has been stopped
    local keep=() pid
    for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
    pids=("${keep[@]}")
}

# ---------- the reports, read by Python: one TSV row per run, then the table ----------
cat > "$tmp/report.py" <<'PY'
import json, re, sys

def ms(us):
    return f"{us / 1000:.3f}"

def buckets_summary(reports):
    """Merges emulate-clients reports (their latency buckets are [value_us, count])."""
    counts = {}
    for r in reports:
        for v, c in r["latency"]:
            counts[v] = counts.get(v, 0) + c
    n = sum(counts.values())
    if n == 0:
        return None
    values = sorted(counts)
    def q(p):
        target, seen = p * n, 0
        for v in values:
            seen += counts[v]
            if seen >= target:
                return v
        return values[-1]
    avg = sum(v * c for v, c in counts.items()) / n
    return {"avg": avg, "p50": q(0.5), "p99": q(0.99), "max": values[-1]}

def row(fields):
    print("\t".join(str(f) for f in fields))

def tranche_core(core_path, stderr_path):
    try:
        return json.load(open(core_path))
    except (OSError, ValueError):
        return None

def main():
    kind, system, scenario = sys.argv[1:4]
    args = dict(a.split("=", 1) for a in sys.argv[4:])
    rss = args.get("rss", "")
    rss = f"{int(rss) / 1024:.0f}" if rss else "—"
    cpu = args.get("cpu") or "—"
    note = args.get("note", "")
    dash = "—"
    if kind == "peer-write":
        text = open(args["out"]).read()
        m = re.search(r"= (\d+) events/s", text)
        if not m:
            row([system, scenario, "failed", dash, dash, dash, dash, dash, "n/c", "n/c", dash, rss, cpu,
                 (note + "; " if note else "") + "no result (see " + args["out"] + ")"])
            return
        row([system, scenario, m.group(1), dash, dash, dash, dash, dash, "n/c", "n/c", dash, rss, cpu, note])
    elif kind == "peer-latency":
        text = open(args["out"]).read()
        p = re.search(r"produced \d+ \((\d+)/s\)", text)
        d = re.search(r"delivered \d+ rows \((\d+)/s\)", text)
        e = re.search(r"empty=([0-9.]+)%", text)
        l = re.search(r"p50=([0-9.]+) p90=[0-9.]+ p99=([0-9.]+) p99\.9=[0-9.]+ max=([0-9.]+)", text)
        if not (p and d and l):
            row([system, scenario, p.group(1) if p else "failed", dash, dash, dash, dash, dash, "n/c", "n/c",
                 dash, rss, cpu, (note + "; " if note else "") + "no deliveries measured (see " + args["out"] + ")"])
            return
        row([system, scenario, p.group(1), d.group(1), dash, l.group(1), l.group(2), l.group(3), "n/c", "n/c",
             e.group(1) if e else dash + " (push)", rss, cpu, note])
    elif kind == "tranche-ingest":
        core = tranche_core(args["core"], args.get("err"))
        if core is None:
            err = open(args["err"]).read() if args.get("err") else ""
            why = "fell behind" if "FELL BEHIND" in err else "failed (see " + args["err"] + ")"
            m = re.search(r"\(([0-9]+) ms at [0-9]+/s, more than the ([0-9]+) ms allowed\) after ([0-9]+) ms", err)
            if m:
                note = (note + "; " if note else "") + f"stopped {m.group(3)} ms in, {m.group(1)} ms of events unacknowledged"
            row([system, scenario, why, dash, dash, dash, dash, dash, dash, dash, dash, rss, cpu, note])
            return
        per_batch = sum(core["events"]) / max(core["batches"], 1)
        a = core["ack_latency"]
        note = (note + "; " if note else "") + (
            f"asked {core['asked_rate']:.0f}/s{'' if core['kept_up'] else ', FELL BEHIND'}; "
            f"{per_batch:.0f} events/request; ack p50 {ms(a['p50_us'])} / p99 {ms(a['p99_us'])} ms")
        row([system, scenario, f"{core['achieved_rate']:.0f}", dash, dash, dash, dash, dash, dash, dash, dash,
             rss, cpu, note])
    elif kind == "tranche-latency":
        core = tranche_core(args["core"], args.get("err"))
        reports = []
        for path in args["clients"].split(","):
            try:
                reports.append(json.load(open(path)))
            except (OSError, ValueError):
                pass
        notes = [note] if note else []
        if core is None:
            err = open(args["err"]).read() if args.get("err") else ""
            notes.append("core fell behind" if "FELL BEHIND" in err else "core failed (see " + args["err"] + ")")
            writes = "fell behind" if "FELL BEHIND" in err else "failed"
        else:
            writes = f"{core['achieved_rate']:.0f}"
            if not core["kept_up"]:
                notes.append(f"FELL BEHIND (asked {core['asked_rate']:.0f}/s)")
        if not reports:
            notes.append("clients failed (see " + args["clients"] + ")")
            row([system, scenario, writes, dash, dash, dash, dash, dash, dash, dash, dash, rss, cpu,
                 "; ".join(notes)])
            return
        rows = sum(r["rows"] for r in reports)
        elapsed = max(r["elapsed_s"] for r in reports)
        polls = sum(r["polls"] for r in reports)
        empty = sum(r["empty_polls"] for r in reports)
        omissions = sum(r["omissions"] for r in reports)
        reorderings = sum(r["reorderings"] for r in reports)
        mismatches = sum(r["mismatches"] for r in reports)
        misfiltered = sum(r["misfiltered"] for r in reports)
        checked = all(r["checked"] for r in reports)
        caught_up = all(r["caught_up"] for r in reports)
        if mismatches or misfiltered:
            notes.append(f"{mismatches} mismatches, {misfiltered} misfiltered")
        if not checked:
            notes.append("NOT CHECKED")
        elif not caught_up:
            notes.append("not every client caught up")
        s = buckets_summary(reports)
        if len(reports) > 1:  # the pilot on replicas: each process's figures too
            for path in args["clients"].split(","):
                try:
                    r = json.load(open(path))
                except (OSError, ValueError):
                    continue
                one = buckets_summary([r])
                who = "replicas' clients" if "replica" in path.rsplit("/", 1)[-1] else "primaries' clients"
                if one:
                    notes.append(f"{who}: {r['clients']}, avg {ms(one['avg'])} / p99 {ms(one['p99'])} ms")
        empty_share = 100 * empty / polls if polls else 0.0
        lat = [ms(s["avg"]), ms(s["p50"]), ms(s["p99"]), ms(s["max"])] if s else [dash] * 4
        # The pilot's criteria: avg <= 1 ms, p99 <= 5 ms, nothing lost or reordered, <= 5 % empty.
        ok = (core is not None and core["kept_up"] and s is not None and checked and caught_up
              and s["avg"] <= 1000 and s["p99"] <= 5000 and omissions == 0 and reorderings == 0
              and mismatches == 0 and misfiltered == 0 and empty_share <= 5.0)
        if args.get("pilot"):
            notes.append("meets the pilot's criteria" if ok else "MISSES the pilot's criteria")
        if args.get("verdict"):
            with open(args["verdict"], "w") as f:
                f.write("pass\n" if ok else "fail\n")
        row([system, scenario, writes, f"{rows / elapsed:.0f}" if elapsed else dash, *lat,
             omissions if checked else "n/c", reorderings, f"{empty_share:.1f}", rss, cpu, "; ".join(notes)])

def table(path):
    header = ["system", "scenario", "writes/s", "rows/s delivered", "avg ms", "p50 ms", "p99 ms", "max ms",
              "omissions", "reorderings", "empty %", "peak RSS MB", "server CPU s", "notes"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---", "---"] + ["---:"] * 11 + ["---"]) + "|")
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        print("| " + " | ".join(f) + " |")

if __name__ == "__main__":
    if sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        main()
PY
results="$tmp/results.tsv"
: > "$results"
record() { python3 "$tmp/report.py" "$@" >> "$results"; tail -1 "$results" | tr '\t' '|' | sed 's/^/  /' >&2; }

# ---------- servers ----------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { # wait_port PORT PID LOG: until something listens on PORT, or PID dies
    local i
    for i in $(seq 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || { log "the server exited: $(tail -5 "$3")"; return 1; }
        [ "$i" -lt 300 ] && sleep 0.1
    done
    log "nothing listens on 127.0.0.1:$1 after 30 s: $(tail -5 "$3")"
    return 1
}
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
peak_rss_kb() { awk '/^VmHWM:/{print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)

# The server under test: its PID(s) and roles, and their CPU ticks when measuring began.
server_pids=()
server_roles=()
declare -A cpu0=()
measure_start() { local p; for p in "${server_pids[@]}"; do cpu0[$p]=$(cpu_ticks "$p"); done; }
# Stops the servers; sets rss (kB, summed), cpu (seconds, summed) and, when there are
# several, rss_detail (each one's peak RSS) of the run.
stop_servers() {
    local p i=0 ticks=0 kb=0 one
    rss_detail=
    for p in "${server_pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            ticks=$((ticks + $(cpu_ticks "$p") - ${cpu0[$p]:-0}))
            one=$(peak_rss_kb "$p")
            kb=$((kb + one))
            rss_detail+="${rss_detail:+, }${server_roles[$i]:-server} $((one / 1024)) MB"
            kill -TERM "$p" 2>/dev/null || true
            for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        else
            log "server $p had already exited"
        fi
        forget "$p"
        i=$((i + 1))
    done
    [ ${#server_pids[@]} -gt 1 ] || rss_detail=
    server_pids=()
    server_roles=()
    rss=$kb
    cpu=$(awk -v t="$ticks" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')
}

start_tarantool() { # start_tarantool DIR WAL_MODE: sets addr
    local dir=$1 port pid
    port=$(free_port)
    mkdir -p "$dir"
    FEED_PORT=$port FEED_WAL=$2 FEED_DIR="$dir/tnt" tarantool "$peers_dir/feed.lua" \
        > "$dir/server.log" 2>&1 &
    pid=$!
    pids+=("$pid"); server_pids=("$pid"); server_roles=(server)
    wait_port "$port" "$pid" "$dir/server.log"
    addr=127.0.0.1:$port
}
start_redis() { # start_redis DIR no|everysec|always: sets addr
    local dir=$1 port pid aof=(--appendonly no)
    [ "$2" = no ] || aof=(--appendonly yes --appendfsync "$2")
    port=$(free_port)
    mkdir -p "$dir"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' "${aof[@]}" \
        > "$dir/server.log" 2>&1 &
    pid=$!
    pids+=("$pid"); server_pids=("$pid"); server_roles=(server)
    wait_port "$port" "$pid" "$dir/server.log"
    addr=127.0.0.1:$port
}
start_nats() { # start_nats DIR: sets addr (storage is the client's choice, -natsfile)
    local dir=$1 port pid
    port=$(free_port)
    mkdir -p "$dir"
    nats-server -js -a 127.0.0.1 -p "$port" -sd "$dir/js" > "$dir/server.log" 2>&1 &
    pid=$!
    pids+=("$pid"); server_pids=("$pid"); server_roles=(server)
    wait_port "$port" "$pid" "$dir/server.log"
    for _ in $(seq 100); do grep -q 'Server is ready' "$dir/server.log" && break; sleep 0.1; done
    addr=nats://127.0.0.1:$port
}
# start_tranche ROLE DIR [ARGS...]: one `tranche feed serve` more (a shard's primary,
# or with --replica-of its replica); sets last_tcp (HOST:PORT) and last_target (the
# address for --transport).
start_tranche() {
    local role=$1 dir=$2 pid line
    shift 2
    mkdir -p "$dir"
    : > "$dir/serve.out"
    "$tranche" feed serve --dir "$dir/store" --listen 127.0.0.1:0 --tcp 127.0.0.1:0 \
        --durability "$durability" "$@" > "$dir/serve.out" 2> "$dir/serve.err" &
    pid=$!
    pids+=("$pid"); server_pids+=("$pid"); server_roles+=("$role")
    line=
    for _ in $(seq 300); do
        line=$(head -1 "$dir/serve.out" 2>/dev/null || true)
        [ -n "$line" ] && break
        kill -0 "$pid" 2>/dev/null || die "tranche feed serve exited: $(cat "$dir/serve.err")"
        sleep 0.1
    done
    [ -n "$line" ] || die "tranche feed serve did not start in 30 s: $(cat "$dir/serve.err")"
    last_tcp=$(grep -o 'tcp://[0-9.:]*' <<<"$line" | sed 's,^tcp://,,')
    if [ "$transport" = tcp ]; then last_target=$last_tcp; else last_target=$(grep -o 'http://[0-9.:]*' <<<"$line"); fi
}

# ---------- runs ----------
feedbench=$tmp/feedbench
if [ -n "$peers" ]; then
    [ -f "$peers_dir/feed-bench/go.mod" ] || die "no peers' yardstick in $peers_dir/feed-bench (set PEERS)"
    log "building the yardstick ($peers_dir/feed-bench, go build from its own go.mod)"
    (cd "$peers_dir/feed-bench" && go build -o "$feedbench" .) || die "could not build $peers_dir/feed-bench"
fi
peer_version() {
    case $1 in
        tarantool) tarantool --version | head -1 ;;
        redis) redis-server --version | grep -o 'v=[0-9.]*' | sed 's/v=/Redis /' ;;
        nats) echo "NATS $(nats-server --version | grep -o '[0-9][0-9.]*' | head -1)" ;;
    esac
}
# Per peer, its start in memory or durable, and the label of each.
start_peer() { # start_peer SYS DIR memory|durable: sets addr, label, flags
    local sys=$1 dir=$2 mode=$3
    flags=()
    case $sys/$mode in
        tarantool/memory) start_tarantool "$dir" none; label="Tarantool, pilot design (WAL off)" ;;
        tarantool/durable)
            if [ "$strict_peers" = 1 ]; then start_tarantool "$dir" fsync; label="Tarantool, pilot design (WAL fsync)"
            else start_tarantool "$dir" write; label="Tarantool, pilot design (WAL written)"; fi ;;
        redis/memory) start_redis "$dir" no; label="Redis Streams (no AOF)" ;;
        redis/durable)
            if [ "$strict_peers" = 1 ]; then start_redis "$dir" always; label="Redis Streams (AOF always)"
            else start_redis "$dir" everysec; label="Redis Streams (AOF everysec)"; fi ;;
        nats/memory) start_nats "$dir"; label="NATS JetStream (memory)" ;;
        nats/durable) start_nats "$dir"; flags=(-natsfile); label="NATS JetStream (file)" ;;
    esac
}

run_peer_ingest() {
    local sys=$1 dir=$tmp/ingest-$1 rc=0
    start_peer "$sys" "$dir" durable
    log "ingest: $label, write mode for ${duration}s"
    measure_start
    bounded $((duration + 60)) "$feedbench" -sys "$sys" -addr "$addr" -mode write -dur "${duration}s" \
        "${flags[@]}" > "$dir/bench.out" 2>&1 || rc=$?
    stop_servers
    [ "$rc" = 0 ] || log "the yardstick exited with $rc: $(tail -3 "$dir/bench.out")"
    record peer-write "$label" ingest "out=$dir/bench.out" "rss=$rss" "cpu=$cpu" \
        "note=closed loop, batches of 100, 8 in flight"
    rm -rf "$dir/tnt" "$dir/js" "$dir/appendonlydir"
}

run_peer_latency() { # run_peer_latency SYS filtered|unfiltered
    local sys=$1 scenario=$2 dir=$tmp/$2-$1 rc=0 mode=memory extra=()
    [ "$peers_durable" = 1 ] && mode=durable
    start_peer "$sys" "$dir" "$mode"
    # Filtered: client i follows broker i of as many brokers as clients (Tranche: firm i).
    if [ "$scenario" = filtered ]; then extra=(-filter -brokers "$clients"); fi
    if [ "$sys" = redis ] && [ "$scenario" = unfiltered ]; then extra+=(-redisblob); label+=", one blob per entry"; fi
    [ "$scenario" = filtered ] && [ "$sys" = redis ] && label+=", a stream per broker"
    log "$scenario: $label, $clients clients at $rate writes/s for ${duration}s"
    measure_start
    bounded $((duration + 60)) "$feedbench" -sys "$sys" -addr "$addr" -mode latency -dur "${duration}s" \
        -warm "${warm}s" -rate "$rate" -clients "$clients" "${flags[@]}" "${extra[@]}" \
        > "$dir/bench.out" 2>&1 || rc=$?
    stop_servers
    [ "$rc" = 0 ] || log "the yardstick exited with $rc: $(tail -3 "$dir/bench.out")"
    record peer-latency "$label" "$scenario" "out=$dir/bench.out" "rss=$rss" "cpu=$cpu" \
        "note=first ${warm}s dropped"
    rm -rf "$dir/tnt" "$dir/js" "$dir/appendonlydir"
}

tranche_label="Tranche ($transport, $durability)"
has_replicas=0

run_tranche_ingest() { # run_tranche_ingest RATE: returns 1 once the core fell behind
    local r=$1 dir=$tmp/ingest-tranche-$1 rc=0
    start_tranche server "$dir"
    targets=(--target "$last_target")
    log "ingest: $tranche_label, one core at $r writes/s for ${duration}s"
    measure_start
    bounded $((duration + 120)) "$tranche" feed emulate-core --transport "$transport" "${targets[@]}" \
        --firms 50 --rate "$r" --duration "$duration" --json > "$dir/core.json" 2> "$dir/core.err" || rc=$?
    stop_servers
    case $rc in 0|3) ;; *) log "emulate-core exited with $rc: $(tail -3 "$dir/core.err")" ;; esac
    record tranche-ingest "$tranche_label" "ingest @ $r" "core=$dir/core.json" "err=$dir/core.err" \
        "rss=$rss" "cpu=$cpu" "note=open loop"
    rm -rf "$dir/store"
    [ "$rc" = 0 ]
}

# run_tranche_clients KEY SCENARIO SHARDS RATE DURATION FIRMS FILTERED UNFILTERED [PILOT]
# (KEY names its directory). With PILOT, the pilot's shape: the unfiltered clients read
# a replica of each shard when `feed serve` has --replica-of, and the run is judged by
# the pilot's criteria (returns 1 when it misses them).
run_tranche_clients() {
    local key=$1 scenario=$2 shards=$3 r=$4 secs=$5 firms=$6 filtered=$7 unfiltered=$8 pilot=${9:-}
    local dir=$tmp/$key rc=0 crc=0 urc=0 cpid upid=0 s extra=() primaries=() readers=() reports
    local on_replicas=0 note core_shards=()
    [ -n "$pilot" ] && [ "$has_replicas" = 1 ] && [ "$unfiltered" -gt 0 ] && on_replicas=1
    if [ "$shards" -gt 1 ] && [ "$one_sharded_server" = 1 ]; then
        # The pilot's shape itself: one server of SHARDS shards (a core per shard) and
        # one replica following all of them.
        start_tranche primary "$dir/shard-1" --shards "$shards"
        primaries+=(--target "$last_target")
        core_shards=(--shards "$shards")
        if [ "$on_replicas" = 1 ]; then
            start_tranche replica "$dir/shard-1-replica" --replica-of "$last_tcp"
            readers+=(--target "$last_target")
        fi
    else
        for s in $(seq "$shards"); do
            start_tranche "shard-$s" "$dir/shard-$s"
            primaries+=(--target "$last_target")
            if [ "$on_replicas" = 1 ]; then
                start_tranche "shard-$s-replica" "$dir/shard-$s-replica" --replica-of "$last_tcp"
                readers+=(--target "$last_target")
            fi
        done
    fi
    log "$scenario: $tranche_label, $shards shard(s), $filtered filtered + $unfiltered unfiltered clients$([ "$on_replicas" = 1 ] && echo ' (on replicas)') at $r writes/s for ${secs}s"
    # The clients wait for the core's run file; the core starts once they are up.
    if [ "$on_replicas" = 1 ]; then
        timeout $((secs + 180)) "$tranche" feed emulate-clients --transport "$transport" "${primaries[@]}" \
            --run-file "$dir/run.json" --filtered "$filtered" --unfiltered 0 --json \
            > "$dir/clients.json" 2> "$dir/clients.err" &
        cpid=$!
        timeout $((secs + 180)) "$tranche" feed emulate-clients --transport "$transport" "${readers[@]}" \
            --run-file "$dir/run.json" --filtered 0 --unfiltered "$unfiltered" --json \
            > "$dir/replica-clients.json" 2> "$dir/replica-clients.err" &
        upid=$!
        pids+=("$cpid" "$upid")
        reports=$dir/clients.json,$dir/replica-clients.json
    else
        timeout $((secs + 180)) "$tranche" feed emulate-clients --transport "$transport" "${primaries[@]}" \
            --run-file "$dir/run.json" --filtered "$filtered" --unfiltered "$unfiltered" --json \
            > "$dir/clients.json" 2> "$dir/clients.err" &
        cpid=$!
        pids+=("$cpid")
        reports=$dir/clients.json
    fi
    sleep 0.5
    measure_start
    bounded $((secs + 120)) "$tranche" feed emulate-core --transport "$transport" "${primaries[@]}" "${core_shards[@]}" \
        --run-file "$dir/run.json" --firms "$firms" --rate "$r" --duration "$secs" --json \
        > "$dir/core.json" 2> "$dir/core.err" || rc=$?
    wait "$cpid" || crc=$?
    forget "$cpid"
    if [ "$upid" != 0 ]; then wait "$upid" || urc=$?; forget "$upid"; fi
    stop_servers
    case $rc in 0|3) ;; *) log "emulate-core exited with $rc: $(tail -3 "$dir/core.err")" ;; esac
    for c in "clients:$crc" "replica-clients:$urc"; do
        case ${c#*:} in 0) ;; 2) log "emulate-clients found problems (exit 2): $(tail -3 "$dir/${c%:*}.err")" ;;
            *) log "emulate-clients exited with ${c#*:}: $(tail -3 "$dir/${c%:*}.err")" ;; esac
    done
    note="one process of $((filtered + unfiltered)) clients"
    if [ -n "$pilot" ]; then
        if [ "$shards" -gt 1 ] && [ "$one_sharded_server" = 1 ]; then
            note="one server of $shards shards"
        else
            note="$shards shard(s), each a server of its own"
        fi
        if [ "$on_replicas" = 1 ]; then
            note+=" with a replica; $filtered filtered clients on the primary, $unfiltered unfiltered on the replica"
        else
            note+=", no replica; all $((filtered + unfiltered)) clients on the primaries"
        fi
        extra=(pilot=1 "verdict=$dir/verdict")
    fi
    [ -z "$rss_detail" ] || note+="; peak RSS $rss_detail"
    record tranche-latency "$tranche_label" "$scenario" "core=$dir/core.json" "err=$dir/core.err" \
        "clients=$reports" "rss=$rss" "cpu=$cpu" "note=$note" "${extra[@]}"
    rm -rf "$dir"/shard-*/store
    [ -z "$pilot" ] || grep -qx pass "$dir/verdict"
}

# ---------- the run ----------
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
# The hypervisor's steal over the whole run: a noisy host shows here, not in the table.
steal_ticks() { awk '/^cpu /{print $9}' /proc/stat; }
steal_start=$(steal_ticks)
run_start=$(date +%s)
log "machine: $machine; load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "tranche: $tranche ($("$tranche" --version 2>/dev/null || echo 'version unknown'))"
versions=
for p in ${peers//,/ }; do versions+="${versions:+, }$(peer_version "$p")"; done
[ -z "$versions" ] || log "peers: $versions"
log "work directory: $tmp"

if want "$scenarios" ingest; then
    for r in ${ingest_rates//,/ }; do
        run_tranche_ingest "$r" || { log "ingest: the core did not keep $r writes/s; the ladder stops here"; break; }
    done
    for p in ${peers//,/ }; do run_peer_ingest "$p"; done
fi
for scenario in filtered unfiltered; do
    want "$scenarios" "$scenario" || continue
    if [ "$scenario" = filtered ]; then
        run_tranche_clients filtered-tranche filtered 1 "$rate" "$duration" "$clients" "$clients" 0
    else
        run_tranche_clients unfiltered-tranche unfiltered 1 "$rate" "$duration" 50 0 "$clients"
    fi
    for p in ${peers//,/ }; do run_peer_latency "$p" "$scenario"; done
done
pilot_note=
if want "$scenarios" pilot; then
    help=$("$tranche" feed serve --help)
    has_replicas=0
    one_sharded_server=0
    if grep -q -- '--shards' <<<"$help" && grep -q -- '--shards' <<<"$("$tranche" feed emulate-core --help)"; then
        one_sharded_server=1
    fi
    if grep -q -- '--replica-of' <<<"$help" && [ "$one_sharded_server" = 1 ]; then
        has_replicas=1
        pilot_note="the pilot's shape: one \`feed serve --shards $pilot_shards\` (a core per shard), one replica (\`--replica-of\`) for the 2 unfiltered clients, 100 filtered clients on the primary"
    elif grep -q -- '--replica-of' <<<"$help"; then
        has_replicas=1
        pilot_note="partial shape: each shard is a server of its own, each with a replica (\`--replica-of\`) for the 2 unfiltered clients"
    else
        pilot_note="partial shape: \`tranche feed serve\` has no --replica-of here, so each shard is a server of its own and the 2 unfiltered clients read the primaries"
    fi
    log "pilot: $pilot_note"
    for r in ${pilot_rates//,/ }; do
        run_tranche_clients "pilot-tranche-$r" "pilot @ $r" "$pilot_shards" "$r" "$pilot_duration" 100 100 2 pilot ||
            { log "pilot: $r writes/s misses the criteria; the ladder stops here"; break; }
    done
fi

stolen=$(awk -v a="$steal_start" -v b="$(steal_ticks)" -v hz="$(getconf CLK_TCK)" -v s="$(( $(date +%s) - run_start ))" -v n="$(nproc)" \
    'BEGIN { t = (b - a) / hz; printf "%.1f s of CPU stolen by the hypervisor (%.0f %% of %d cores over %d s)", t, (s > 0 ? 100 * t / (s * n) : 0), n, s }')
echo "machine: $machine; load average at the end $(cut -d' ' -f1-3 /proc/loadavg); $stolen"
echo "tranche: $tranche${versions:+; peers: $versions}"
echo "command: bench/feed-vs-peers.sh --scenarios $scenarios --peers ${peers:-none} --duration $duration --pilot-duration $pilot_duration --warm $warm --ingest-rates $ingest_rates --pilot-rates $pilot_rates --rate $rate --clients $clients --transport $transport --durability $durability$([ "$peers_durable" = 1 ] && echo ' --peers-durable')$([ "$strict_peers" = 1 ] && echo ' --strict-peers')"
[ ${#skipped[@]} = 0 ] || echo "left out (not installed): ${skipped[*]}"
[ -z "$pilot_note" ] || echo "pilot: $pilot_note"
echo
python3 "$tmp/report.py" table "$results"
