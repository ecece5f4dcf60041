#!/usr/bin/env bash
# The nightly recipe (docs/nightly.md) as one script, for cron or any CI: profile the suite, gate
# it against the last 14 nights, and when the gate fails, rerun the suite and fail (exit 1) only
# if the rerun confirms the regression. Run from the infer-prof checkout; set MODEL to change it.
set -uo pipefail
D=$(date +%F)
MODEL=${MODEL:-llama-3.1-8b}
HISTORY=${HISTORY:-results/history.sqlite}
run() {
  .venv/bin/infer-prof run --model "$MODEL" --load-format dummy --suite nightly \
    --history-db "$HISTORY" --label nightly="$D" --no-progress "$@"
}
gate() {
  .venv/bin/infer-prof regress --baseline history:14 --history "$HISTORY" \
    --current "results/nightly/$D" --junit "results/nightly/$D/gate.xml" \
    --markdown "results/nightly/$D/gate.md" "$@"
}
run --results-dir "results/nightly/$D" || exit $?
gate && exit 0
status=$?
[ "$status" -eq 1 ] || exit "$status"  # 2: bad input, nothing to confirm
echo "the gate failed: measuring again; it fails only if the rerun agrees" >&2
run --results-dir "results/nightly/$D-rerun" --label rerun=1 || exit $?
gate --confirm "results/nightly/$D-rerun"
