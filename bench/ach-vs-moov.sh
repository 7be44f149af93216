#!/usr/bin/env bash
# Side by side in one run on this machine: Tranche's payment files against moov-io/ach,
# the Go library a payments team would pick instead, on the same number of entries in
# files of the same size; both outputs checked by moov's achcli and `tranche ach
# validate`.
#
#   bench/ach-vs-moov.sh                       # 1,000,000 entries, files of 25,000, 3 rounds
#   ENTRIES=200000 ROUNDS=2 bench/ach-vs-moov.sh
#
# Per round (the order alternates between rounds, the machine is noisy):
#   1. tranche bench ach --entries N --cap PER: a generated day (4 banks, a few large
#      employers, many small ones, same-day and next-day) imported from CSV into the
#      embedded ledger, packaged into files (claims, map, reduce, write, validate,
#      record), then imported again over HTTP into a fresh ledger;
#   2. tranche bench ach --writer-only: Tranche's file writer alone on one core, in a
#      process of its own, on the peer's shape (N PPD credits, files of PER, each file
#      validated and written to disk);
#   3. achgen (the peer yardstick in $PEERS/ach-moov, moov-io/ach v1.63.3) writing N PPD
#      credits into files of PER, on one core (-workers 1) and on both (-workers 2).
# With BROKER=redis://… and LEDGER=postgres://… (an empty database) it also runs the
# packaging on them with two worker processes.
#
# Prints one line per run and a Markdown table of the rounds (stdout); progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
entries=${ENTRIES:-1000000}
per=${PER:-25000}
rounds=${ROUNDS:-3}
peers=${PEERS:-$root/../shared/peers}
tranche=${TRANCHE:-$root/target/release/tranche}
log() { echo "ach-vs-moov: $*" >&2; }

command -v go >/dev/null || { log "needs Go"; exit 1; }
command -v achcli >/dev/null || { log "needs achcli (.ci/run builds it)"; exit 1; }
[ -d "$peers/ach-moov" ] || { log "no peer yardstick at $peers/ach-moov (set PEERS)"; exit 1; }
[ -x "$tranche" ] || cargo build --release -p tranche

tmp=$(mktemp -d -t ach-vs-moov.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The yardstick is built where it is, from its own go.mod and go.sum (not copied in).
(cd "$peers/ach-moov" && go build -o "$tmp/achgen" .)

machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
log "machine: $machine; load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "$entries entries, files of $per, $rounds rounds"

# achcli on a few of the NACHA files under a directory, `tranche ach validate` on all.
check() {
    local what=$1 dir=$2
    local files
    mapfile -t files < <(find "$dir" -name '*.ach' | sort)
    "$tranche" ach validate "${files[@]}" >/dev/null || { log "$what: tranche ach validate refused a file"; exit 1; }
    for f in "${files[0]}" "${files[${#files[@]}/2]}" "${files[-1]}"; do
        achcli -reformat=ach "$f" >/dev/null 2>&1 || { log "$what: achcli refused $f"; exit 1; }
    done
    log "$what: ${#files[@]} files valid (tranche ach validate: all; achcli: first, middle, last)"
}

run_tranche() {
    local round=$1 dir="$tmp/tranche-$1"
    "$tranche" bench ach --entries "$entries" --cap "$per" --dir "$dir" --json > "$tmp/tranche-$round.json"
    check "tranche packaged, round $round" "$dir/store"
    rm -rf "$dir"
    "$tranche" bench ach --writer-only --entries "$entries" --cap "$per" --dir "$dir-writer" --json \
        > "$tmp/writer-$round.json"
    check "tranche writer alone, round $round" "$dir-writer"
    rm -rf "$dir-writer"
}

run_moov() {
    local round=$1 workers=$2 dir="$tmp/moov-$1-$2"
    mkdir -p "$dir"
    "$tmp/achgen" -n "$entries" -per "$per" -workers "$workers" -out "$dir" > "$tmp/moov-$round-$workers.txt"
    check "moov-io/ach $workers worker(s), round $round" "$dir"
    rm -rf "$dir"
}

for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        run_tranche "$round"; run_moov "$round" 1; run_moov "$round" 2
    else
        run_moov "$round" 2; run_moov "$round" 1; run_tranche "$round"
    fi
    log "round $round: tranche $(cat "$tmp/tranche-$round.json")"
    log "round $round: tranche writer alone $(cat "$tmp/writer-$round.json")"
    log "round $round: moov 1 worker: $(tail -1 "$tmp/moov-$round-1.txt")"
    log "round $round: moov 2 workers: $(tail -1 "$tmp/moov-$round-2.txt")"
done

if [ -n "${BROKER:-}" ] && [ -n "${LEDGER:-}" ]; then
    log "on $BROKER and the ledger in LEDGER, two worker processes"
    "$tranche" --broker "$BROKER" --ledger "$LEDGER" bench ach --entries "$entries" --cap "$per" \
        --processes 2 --dir "$tmp/fleet" --json > "$tmp/fleet.json"
    log "fleet: $(cat "$tmp/fleet.json")"
fi

moov_rate() { grep -o '=> [0-9]* entries/s' "$1" | grep -o '[0-9]*'; }
json() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))[sys.argv[2]], 2))" "$1" "$2"; }

echo "machine: $machine"
echo "command: ENTRIES=$entries PER=$per ROUNDS=$rounds bench/ach-vs-moov.sh"
echo
echo "| round | CSV import entries/s | HTTP import entries/s | packaging s (entries/s) | files | packaging peak RSS MB | writer alone, 1 core, entries/s | moov-io/ach 1 worker entries/s | moov-io/ach 2 workers entries/s | writer / moov 1 worker |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$rounds"); do
    t="$tmp/tranche-$round.json"
    w=$(json "$tmp/writer-$round.json" entries_per_sec)
    m1=$(moov_rate "$tmp/moov-$round-1.txt")
    m2=$(moov_rate "$tmp/moov-$round-2.txt")
    ratio=$(python3 -c "print(round($w / $m1, 2))")
    echo "| $round | $(json "$t" import_entries_per_sec) | $(json "$t" http_import_entries_per_sec) | $(json "$t" package_seconds) ($(json "$t" package_entries_per_sec)) | $(json "$t" files) | $(json "$t" package_peak_rss_mb) | $w | $m1 | $m2 | $ratio |"
done
if [ -f "$tmp/fleet.json" ]; then
    f="$tmp/fleet.json"
    echo
    echo "Redis + PostgreSQL, two worker processes: import $(json "$f" import_entries_per_sec) entries/s, packaging $(json "$f" package_seconds) s ($(json "$f" package_entries_per_sec) entries/s), $(json "$f" files) files"
fi
