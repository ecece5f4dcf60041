#!/usr/bin/env bash
# `infer-prof matrix --ray` and its tests need Ray (the optional extra infer-prof[ray]). Ray goes
# into the project's virtual environment only when that changes no package already installed
# there (checked with pip's --dry-run: it must only add packages); otherwise into a venv of its
# own (.venv-ray, with infer-prof installed editable), which the Ray tests then use
# (INFER_PROF_RAY_PYTHON). Also needs `unshare` and `ip` (util-linux, iproute2) for the tests'
# private network namespace. Fast when present. Versions from the lock the venv was installed
# with (recorded by setup_env.sh in $VENV/.infer-prof-lock), which pins Ray's dependencies too.
set -euo pipefail
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
RAY_SPEC=${RAY_SPEC:-"ray==2.60.0"}
LOCK_FILE=$(cat "$VENV/.infer-prof-lock" 2>/dev/null || echo none)
CONSTRAINTS=()
if [ "$LOCK_FILE" != none ] && [ -f "$LOCK_FILE" ]; then CONSTRAINTS=(-c "$LOCK_FILE"); fi
if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
if "$PY" -c "import ray" >/dev/null 2>&1; then
  exit 0
fi
plan=$("$PY" -m pip install --dry-run "${CONSTRAINTS[@]}" "$RAY_SPEC" 2>/dev/null | grep '^Would install' || true)
# a package that is already installed shows up in "Would install" with another version
changes=""
for item in ${plan#Would install }; do
  name=${item%-*}
  if "$PY" -m pip show "$name" >/dev/null 2>&1; then changes="$changes $name"; fi
done
if [ -n "$plan" ] && [ -z "$changes" ]; then
  echo "installing $RAY_SPEC into $VENV (it changes no installed package)"
  "$PY" -m pip install -q "${CONSTRAINTS[@]}" "$RAY_SPEC"
else
  echo "Ray would change$changes in $VENV: installing it into .venv-ray instead"
  python3 -m venv .venv-ray
  .venv-ray/bin/python -m pip install -q "${CONSTRAINTS[@]}" "$RAY_SPEC" -e .
  echo "export INFER_PROF_RAY_PYTHON=$PWD/.venv-ray/bin/python for the Ray tests"
fi
