#!/usr/bin/env bash
# Contract notes side by side, in one run on this machine:
#   1. `tranche bench notes`: the whole chain in one process (process → render → sign →
#      mail), AES-256 (R6), mail to the outbox (or SMTP with SMTP=url);
#   2. the way the reference system renders: the `typst` CLI compiling the same notes'
#      sources, one process per document (needs `cargo install typst-cli --locked`),
#      on one core and on all cores;
#   3. signing: tranche-sign against pyHanko on the same note and identity
#      (bench/sign-pyhanko.py; needs `pip install pyhanko pyhanko-certvalidator`).
#
#   bench/notes-vs-peers.sh            # 1,000 clients
#   CLIENTS=5000 bench/notes-vs-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${CLIENTS:-1000}
cores=$(nproc)
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
cargo build --release -q -p tranche
cargo build --release -q -p tranche-sign --example bench_sign
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "== tranche bench notes --clients $clients" >&2
args=(bench notes --clients "$clients" --keep "$dir/night" --export-typst "$dir/typst")
[ -n "${SMTP:-}" ] && args+=(--smtp "$SMTP")
target/release/tranche "${args[@]}"

if command -v typst >/dev/null; then
    # sort, not head: head closing the pipe early fails find under pipefail.
    notes=$(find "$dir/typst" -mindepth 1 -maxdepth 1 -type d ! -name fonts | sort | sed -n "1,${TYPST_NOTES:-300}p")
    n=$(echo "$notes" | wc -l)
    compile() {
        typst compile --root "$1" --font-path "$2" --ignore-system-fonts --no-pdf-tags \
            "$1/contract-note.typ" "$1/note.pdf" 2>/dev/null ||
        typst compile --root "$1" --font-path "$2" --ignore-system-fonts \
            "$1/contract-note.typ" "$1/note.pdf"
    }
    export -f compile
    for p in 1 "$cores"; do
        start=$(date +%s.%N)
        echo "$notes" | xargs -P "$p" -I{} bash -c 'compile "$1" "$2"' _ {} "$dir/typst/fonts"
        end=$(date +%s.%N)
        echo "typst CLI ($(typst --version | head -1)), one process per note, $p at once: $n notes in $(echo "$end - $start" | bc) s = $(echo "scale=1; $n / ($end - $start)" | bc) notes/s"
    done
else
    echo "typst CLI not installed (cargo install typst-cli --locked): skipped" >&2
fi

if python3 -c 'import pyhanko' 2>/dev/null; then
    echo "== signing: tranche-sign vs pyHanko, same note and identity" >&2
    target/release/examples/bench_sign --dir "$dir/sign" 200
    python3 bench/sign-pyhanko.py "$dir/sign" 200
else
    echo "pyHanko not installed: skipped" >&2
fi
