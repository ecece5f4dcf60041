#!/usr/bin/env bash
# The gateway tests (tests/integration/test_gateway_nginx.py) run Debian's real nginx in front
# of the built-in synthetic server: each test starts its own nginx as a non-daemon child with a
# configuration in its tmp_path, listening on 127.0.0.1 only. Installs the `nginx-light` package
# when nginx is missing and this user may (root with apt-get); otherwise says how. Fast when present.
set -euo pipefail
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's nginx-light for the gateway tests"
  apt-get update -qq >/dev/null
  # policy-rc.d 101: the package must not start a system nginx of its own (the tests start theirs)
  rcd=/usr/sbin/policy-rc.d
  made_rcd=0
  if [ ! -e "$rcd" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$rcd" && chmod +x "$rcd" && made_rcd=1
  fi
  log=$(mktemp)
  status=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light \
    >"$log" 2>&1 || status=$?
  if [ "$made_rcd" = 1 ]; then rm -f "$rcd"; fi
  if [ "$status" != 0 ]; then cat "$log" >&2; fi
  rm -f "$log"
  exit "$status"
else
  echo "note: nginx is missing; the nginx gateway tests will be skipped." \
       "Install it with: sudo apt-get install -y nginx-light" >&2
fi
