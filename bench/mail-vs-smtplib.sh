#!/usr/bin/env bash
# Side by side, in one run on this machine: tranche-mail's SMTP mailer (pool sizes 1
# and 4) against Python's smtplib (one connection, one process), each sending N
# contract-note mails with a 150 KB attachment to postfix's smtp-sink on loopback,
# which writes every message to a file. Prints the JSON lines and a Markdown table.
#
#   bench/mail-vs-smtplib.sh              # N = 2000
#   COUNT=500 bench/mail-vs-smtplib.sh
#   SINK=aiosmtpd bench/mail-vs-smtplib.sh   # the strict, slower Python sink
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-2000}
sink=${SINK:-smtp-sink}

if [ "$sink" = smtp-sink ] && ! command -v smtp-sink >/dev/null; then
    echo "installing postfix for smtp-sink" >&2
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postfix >/dev/null
fi
python3 -c 'import aiosmtpd' 2>/dev/null || [ "$sink" != aiosmtpd ] || python3 -m pip install -q aiosmtpd

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
cargo build --release -q -p tranche-mail --example bench_mail

dir=$(mktemp -d)
chmod 755 "$dir" # smtp-sink writes as nobody
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_sink() {
    rm -rf "$dir/mail"; mkdir -p "$dir/mail"
    if [ "$sink" = smtp-sink ]; then
        chown nobody "$dir/mail"
        smtp-sink -u nobody -d "$dir/mail/%Y%m%d%H/%M%S." "127.0.0.1:$port" 256 &
    else
        mkdir -p "$dir/mail"/{cur,new,tmp}
        python3 -m aiosmtpd -n -l "127.0.0.1:$port" -c aiosmtpd.handlers.Mailbox "$dir/mail" &
    fi
    sink_pid=$!
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null && return
        sleep 0.1
    done
    echo "the sink did not listen" >&2; exit 1
}
stop_sink() { kill "$sink_pid" 2>/dev/null || true; wait "$sink_pid" 2>/dev/null || true; }
delivered() { find "$dir/mail" -type f | wc -l; }
trap 'kill "$sink_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT

results=()
for pool in 1 4; do
    start_sink
    results+=("$(./target/release/examples/bench_mail --url "smtp://127.0.0.1:$port" --count "$count" --pools "$pool")")
    stop_sink
    echo "pool $pool: $(delivered) files in the sink" >&2
done
start_sink
results+=("$(python3 bench/peer-smtplib.py --url "smtp://127.0.0.1:$port" --count "$count")")
stop_sink
echo "smtplib: $(delivered) files in the sink" >&2
printf '%s\n' "${results[@]}"

python3 - "$sink" "${results[@]}" <<'PY'
import json, sys
sink, rows = sys.argv[1], [json.loads(a) for a in sys.argv[2:]]
print(f"\n{rows[0]['messages']:,} mails of {rows[0]['message_bytes']/1e3:.0f} KB to {sink} on loopback\n")
print("| client | connections | mails/s | MB/s |")
print("|---|---:|---:|---:|")
for r in rows:
    print(f"| {r['client']}{' pool ' + str(r['pool']) if r['client'] != 'python smtplib' else ''} | {r['connections']} | {r['msgs_per_sec']:,.0f} | {r['mb_per_sec']:,.1f} |")
PY
