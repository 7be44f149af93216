#!/usr/bin/env bash
# Local secrets for deploy/compose.yaml: random passwords, an S3 key pair for MinIO,
# a dashboard token and a self-signed signing identity (PKCS#12). Written next to this
# script, owner-only, and ignored by git. Never use these outside a laptop.
#
#   deploy/secrets/make-dev-secrets.sh          # keeps files that already exist
set -euo pipefail
cd "$(dirname "$0")"
umask 077
rand() { openssl rand -hex "${1:-24}"; }
put() { [ -s "$1" ] || { printf '%s' "$2" > "$1"; echo "wrote deploy/secrets/$1"; }; }

put redis_password "$(rand)"
put s3_access_key "tranche$(rand 6)"
put s3_secret_key "$(rand)"
put sign_p12_password "$(rand)"
put owner_password "$(rand)"
put tranche_tokens "$(rand 32)"
if [ ! -s signer.p12 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    openssl req -x509 -newkey rsa:3072 -nodes -days 365 -subj "/CN=Tranche local signer" \
        -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
    openssl pkcs12 -export -inkey "$tmp/key.pem" -in "$tmp/cert.pem" -name "Tranche local signer" \
        -passout file:sign_p12_password -out signer.p12
    echo "wrote deploy/secrets/signer.p12 (self-signed)"
fi
# The containers run as uid 10001 (deploy/Dockerfile); compose mounts file secrets
# as they are, so let that user read them.
chmod 0644 redis_password s3_access_key s3_secret_key sign_p12_password owner_password \
    tranche_tokens signer.p12
