#!/bin/sh
# Tranche reads its own secrets from NAME or NAME_FILE (TRANCHE_REDIS_PASSWORD_FILE,
# TRANCHE_SIGN_P12_PASSWORD_FILE, TRANCHE_OWNER_PASSWORD_FILE, TRANCHE_SMTP_PASSWORD_FILE).
# The AWS SDKs have no _FILE form: export AWS_ACCESS_KEY_ID etc. from the file named by
# AWS_ACCESS_KEY_ID_FILE (e.g. a compose secret), so keys stay out of the compose file.
set -eu
for v in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN; do
    eval "f=\${${v}_FILE:-}"
    if [ -n "$f" ]; then
        value=$(cat "$f")
        export "$v=$value"
        unset "${v}_FILE"
    fi
done
exec "$@"
