#!/usr/bin/env bash
# The LiteLLM gateway tests (tests/integration/test_gateway_litellm.py) run LiteLLM's proxy
# server from PyPI in front of the built-in synthetic server. LiteLLM pins many packages that
# could clash with vLLM's, so it lives in its own virtual environment (.venv-litellm beside the
# project's, ignored by git), never in the project's. Fast when present; a failure to install
# is reported and the LiteLLM tests then skip, saying why. Versions from lock/litellm-py<X.Y>.txt
# (`make lock`), or the newest releases with INFER_PROF_LOCK=latest.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${LITELLM_VENV:-.venv-litellm}
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
CONSTRAINTS=()
if [ "${INFER_PROF_LOCK:-locked}" = locked ] && [ -f "lock/litellm-py$pyver.txt" ]; then
  CONSTRAINTS=(-c "lock/litellm-py$pyver.txt")
fi
STAMP="$VENV/.litellm-installed"
if [ -e "$STAMP" ]; then
  exit 0
fi
echo "installing LiteLLM's proxy into $VENV for the gateway tests"
"$PYTHON" -m venv "$VENV"
log=$(mktemp)
if "$VENV/bin/python" -m pip install -q "${CONSTRAINTS[@]}" "litellm[proxy]" >"$log" 2>&1; then
  touch "$STAMP"
else
  echo "note: LiteLLM could not be installed into $VENV; its gateway tests will be skipped:" >&2
  tail -n 20 "$log" >&2
fi
rm -f "$log"
