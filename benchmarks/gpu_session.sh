#!/usr/bin/env bash
# Issue 35's cases on the lent GPU, in one device call after ../shared/gpu's setup1-3.sh:
#   run carry [".gpu/s", ".gpu/c4"]:  bash benchmarks/gpu_session.sh [BUDGET_S]
# Installs the MoE kernels when .gpu/c4 came along (benchmarks/gpu_carry_moe.sh builds it), then
# runs benchmarks/gpu_session.py inside BUDGET_S seconds (default 540; the device call's limit is
# 600), every result written under $OUT as soon as it exists. Afterwards, here:
#   .venv/bin/python benchmarks/gpu_session_report.py FILES_AT --markdown --csv FILE
set -uo pipefail
[ -f .gpu/s/env.sh ] || { echo "no .gpu/s: carry it (bash ../shared/gpu/carry_vllm.sh)" >&2; exit 2; }
[ -d /tmp/site/vllm ] || { echo "no vLLM in /tmp/site: the machine was replaced; run setup1-3.sh again" >&2; exit 10; }
source .gpu/s/env.sh
OUT=${OUT:-/tmp/gpu-session-out}; mkdir -p "$OUT"
if [ -f .gpu/c4/_moe_C_stable_libtorch.abi3.so.xz ] && [ ! -f /tmp/site/vllm/_moe_C_stable_libtorch.abi3.so ]; then
  xz -dc -T8 .gpu/c4/_moe_C_stable_libtorch.abi3.so.xz > /tmp/site/vllm/_moe_C_stable_libtorch.abi3.so \
    && echo "MoE kernels installed"
fi
python3 benchmarks/gpu_session.py --out "$OUT" --budget-s "${1:-540}"
