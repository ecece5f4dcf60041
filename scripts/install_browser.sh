#!/usr/bin/env bash
# The report test renders the HTML report in a real headless browser: Debian's Chromium.
# Installs it when it is missing and this user may (root with apt-get); otherwise says how.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the report's browser test"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "note: /usr/bin/chromium is missing; the browser test will be skipped." \
       "Install it with: sudo apt-get install -y chromium" >&2
fi
