#!/usr/bin/env bash
# Build .gpu/c4: vLLM 0.26.0's MoE kernels (vllm/_moe_C_stable_libtorch.abi3.so, 47.5 MB, 40.4 MB
# xz-compressed), which ../shared/gpu/carry_vllm.sh strips to fit its three chunks. Without them a
# mixture-of-experts model does not start on the lent GPU (benchmarks/gpu_session.py skips its
# MoE case and says why). Carry .gpu/c4 beside .gpu/s in the session's call:
#   bash ../shared/gpu/carry_vllm.sh && bash benchmarks/gpu_carry_moe.sh      # here, ~1 min
#   run carry [".gpu/s", ".gpu/c4"]: bash benchmarks/gpu_session.sh           # on the device
set -euo pipefail
[ -d .git ] && [ -d infer_prof ] || { echo "run from the project root" >&2; exit 2; }
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
STAGE=$(mktemp -d); trap 'rm -rf "$STAGE"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$STAGE/w" vllm==0.26.0
python3 - "$STAGE" <<'PY'
import glob, sys, zipfile
stage = sys.argv[1]
zipfile.ZipFile(glob.glob(stage + "/w/vllm-*.whl")[0]).extract(
    "vllm/_moe_C_stable_libtorch.abi3.so", stage + "/x")
PY
rm -rf .gpu/c4 && mkdir -p .gpu/c4
xz -9 -T2 -c "$STAGE/x/vllm/_moe_C_stable_libtorch.abi3.so" > .gpu/c4/_moe_C_stable_libtorch.abi3.so.xz
du -sh .gpu/c4
