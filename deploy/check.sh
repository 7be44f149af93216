#!/usr/bin/env bash
# Validate deploy/ offline (no Docker engine, no Nomad server needed):
#   1. YAML syntax of compose.yaml (PyYAML, installed if missing);
#   2. deploy/check (Go): compose.yaml through Docker Compose's own loader (compose-go
#      v2.16.2: schema, merge keys, references) and every nomad/*.nomad.hcl through
#      Nomad's job-spec parser (jobspec2 of Nomad v1.10.5, strict), each with checks of
#      what a Tranche deployment needs (roles, queues, SIGTERM and a kill timeout past
#      the 30 s grace period, secrets only through files/templates, Redis noeviction +
#      AOF); the ACL policy as HCL;
#   3. shell syntax of the scripts (and shellcheck when installed).
# Exits non-zero on the first failing step.
set -euo pipefail
cd "$(dirname "$0")"

echo "== YAML syntax"
if ! python3 -c 'import yaml' 2>/dev/null; then
    python3 -m pip install -q pyyaml
fi
python3 -c 'import yaml,sys; yaml.safe_load(open(sys.argv[1])); print("ok    " + sys.argv[1])' compose.yaml

echo "== compose loader and Nomad job specs"
(cd check && go build -o "${TMPDIR:-/tmp}/tranche-deploy-check" .)
"${TMPDIR:-/tmp}/tranche-deploy-check" compose.yaml nomad/*.hcl

echo "== shell scripts"
sh -n docker-entrypoint.sh
echo "ok    docker-entrypoint.sh (sh -n)"
for f in secrets/make-dev-secrets.sh check.sh; do
    bash -n "$f"
    echo "ok    $f (bash -n)"
done
if command -v shellcheck >/dev/null; then
    shellcheck docker-entrypoint.sh secrets/make-dev-secrets.sh check.sh
    echo "ok    shellcheck"
else
    echo "skip  shellcheck (not installed)"
fi
echo "all deploy checks passed"
