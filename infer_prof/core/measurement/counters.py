"""Server counters that exist but count nothing unless the server was started with a flag.

Pure. vLLM registers some Prometheus counters whatever its settings, and leaves them at 0 unless
a flag turned the measurement on: ``vllm:estimated_read_bytes_per_gpu_total`` (and the FLOP and
write-byte estimates beside it) counts only with ``--enable-mfu-metrics``. Reading such a counter
as "0 bytes read" would be a false measurement: it is reported as null with the reason.

The decision, for a counter's increase over the measured window:

- the increase is > 0: it was counted; the value stands (whatever the flags say: a later vLLM
  may count it by default).
- the increase is exactly 0 and infer-prof started the server without the flag: not counted.
- the increase is exactly 0 while output tokens were generated in the window (the server's launch
  flags unknown, as for ``--endpoint``, or the flag given): not counted; the server did work that
  the counter would have seen.
- otherwise (0 with nothing generated): a measured 0.
"""

from __future__ import annotations

from collections.abc import Sequence

_TRUE = {"", "1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def flag_enabled(args: Sequence[str] | None, flag: str) -> bool | None:
    """Whether the command line ``args`` turns on the boolean (argparse
    ``BooleanOptionalAction``) flag ``flag`` (``"--enable-mfu-metrics"``).

    The last of ``--flag``, ``--flag=true|false``, ``--no-flag`` wins; ``_`` and ``-`` are the
    same in names (vLLM accepts both). ``None`` when it cannot be told: no command line, or one
    that reads options from a ``--config`` file. ``False`` when the flag is not given.
    ``flag_enabled(["--x", "--enable-mfu-metrics"], "--enable-mfu-metrics") is True``.
    """
    if args is None:
        return None
    want = flag.lstrip("-").replace("_", "-")
    state = False
    for arg in args:
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        name = name.replace("_", "-")
        if name == "config":
            return None
        if name == want:
            v = value.strip().lower() if eq else ""
            if v in _TRUE:
                state = True
            elif v in _FALSE:
                state = False
        elif name == f"no-{want}":
            state = False
    return state


def not_counted_reason(
    increase: float | None,
    metric: str,
    flag: str,
    flag_on: bool | None,
    output_tokens: int | None,
) -> str | None:
    """Why the window increase ``increase`` of counter ``metric`` is not a measurement, or
    ``None`` when it is one (see the module docstring for the rule).

    ``flag_on``: :func:`flag_enabled` on the server's launch arguments (``None``: unknown);
    ``output_tokens``: tokens generated in the window (``None``: unknown). An ``increase`` of
    ``None`` (counter not read) is left to the caller: no reason here.
    """
    if increase is None or increase > 0:
        return None
    if flag_on is False:
        return (
            f"not counted: vLLM counts {metric} only when started with {flag}, and infer-prof "
            f"started it without (add --engine-arg={flag})"
        )
    if output_tokens:
        return (
            f"not counted: {metric} rose by 0 while {output_tokens:,} output tokens were "
            f"generated (vLLM counts it only with {flag})"
        )
    return None
