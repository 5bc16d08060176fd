#!/usr/bin/env bash
# Install (Debian packages, as root) and start what the test suite talks to: PostgreSQL on loopback,
# Chromium for the report, Prometheus for the dashboards. Idempotent; prints the PostgreSQL URL last.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# Only the URL goes to stdout (callers capture it); everything the tools say goes to stderr —
# pg_ctlcluster, for one, prints "Removed stale pid file." after an unclean shutdown.
exec 3>&1 1>&2
need=()
command -v chromium >/dev/null || need+=(chromium)
command -v prometheus >/dev/null || need+=(prometheus)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${need[*]} — install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# PostgreSQL: the packaged cluster, on loopback only, with a throwaway role and database for tests.
ver=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | grep -q "^$ver main"; then
  pg_createcluster "$ver" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $4}' | grep -q online; then
  pg_ctlcluster "$ver" main start -o "-c listen_addresses=127.0.0.1" 3>&-  # the server must not hold our stdout open
fi
port=$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $3}')
runuser -u postgres -- psql -q -p "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname='tracejudge'" | grep -q 1 \
  || runuser -u postgres -- psql -q -p "$port" -c "CREATE ROLE tracejudge LOGIN PASSWORD 'tracejudge' CREATEDB"
runuser -u postgres -- psql -q -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname='tracejudge_test'" | grep -q 1 \
  || runuser -u postgres -- psql -q -p "$port" -c "CREATE DATABASE tracejudge_test OWNER tracejudge"
echo "postgresql://tracejudge:tracejudge@127.0.0.1:$port/tracejudge_test" >&3
