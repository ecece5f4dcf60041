#!/usr/bin/env bash
# The history tests run a real PostgreSQL server (started and stopped by the tests themselves,
# tests/postgres.py): Debian's `postgresql` package provides initdb and pg_ctl. Installs it when
# it is missing and this user may (root with apt-get); otherwise says how. Fast when present.
set -euo pipefail
if command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's postgresql for the history tests"
  apt-get update -qq >/dev/null
  # policy-rc.d 101: the package must not start a cluster of its own (the tests start theirs)
  rcd=/usr/sbin/policy-rc.d
  made_rcd=0
  if [ ! -e "$rcd" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$rcd" && chmod +x "$rcd" && made_rcd=1
  fi
  log=$(mktemp)
  status=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql \
    >"$log" 2>&1 || status=$?
  if [ "$made_rcd" = 1 ]; then rm -f "$rcd"; fi
  if [ "$status" != 0 ]; then cat "$log" >&2; fi
  rm -f "$log"
  exit "$status"
else
  echo "note: PostgreSQL (initdb) is missing; the PostgreSQL history tests will be skipped." \
       "Install it with: sudo apt-get install -y postgresql" >&2
fi
