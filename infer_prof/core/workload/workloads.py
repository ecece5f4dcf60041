"""Workloads: what traffic a run sends (lengths, how many, when) and what it must meet (SLOs).

Pure: this module validates mappings (a parsed workload file) and draws requests from them; reading
files lives in ``infer_prof.catalog.workloads``. The file format is documented field by field in
``workloads/README.md``; in short::

    name = "chat"                       # defaults to the file's stem
    description = "..."
    input_len = { kind = "lognormal", median = 256, sigma = 1.0, min = 4, max = 4096 }
    output_len = 128                    # a bare number is a fixed length
    num_requests = 500                  # or duration_s = 120 (exactly one of the two)
    warmup = "steady"                   # or "requests" (warmup_requests first), or "30s"
    seed = 0
    min_requests = 100                  # validity: fewer completed -> the run is marked invalid
    min_duration_s = 30
    [arrival]                           # closed loop ...
    mode = "closed"
    concurrency = 16
    # ... or open loop: mode = "open", rate = 4.0 (req/s, inf allowed), burstiness = 1.0,
    #     process = "poisson" | "gamma" | "constant", max_concurrency = 256
    [shared_prefix]
    fraction = 0.0                      # share of requests whose prompt starts with a shared prefix
    length = 0                          # prefix tokens (part of input_len, not added to it)
    groups = 1                          # how many distinct prefixes those requests spread over
    dataset = "data/chat.jsonl"         # optional: prompts from this file (relative to this one)
    api = "chat"                        # optional: completions (default) or chat
    [slo]                               # optional, milliseconds
    ttft_p99 = 2000
    tpot_p99 = 200

Suites (``kind = "suite"``) are :mod:`infer_prof.core.workload.workload_suites`; drawing requests
from a workload is :mod:`infer_prof.core.workload.workload_sampling`.

Every validation failure raises :class:`~infer_prof.core.workload.workload_fields.WorkloadError`,
one line naming the file, the field and what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import msgspec
from msgspec import UNSET, UnsetType

from infer_prof.core.workload.arrivals import ARRIVAL_KINDS, ArrivalProcess
from infer_prof.core.workload.distributions import LengthDistribution
from infer_prof.core.workload.slo import SLO_KEY_RE, SLO_METRICS
from infer_prof.core.workload.workload_fields import FieldReader, WorkloadError, type_name
from infer_prof.core.workload.workload_record import (
    ApiKind,
    ArrivalRecord,
    ClosedArrivalRecord,
    OpenArrivalRecord,
    SharedPrefixRecord,
    WorkloadRecord,
)

WORKLOAD_FIELDS = ("kind", "name", "description", "input_len", "output_len", "num_requests",
                   "duration_s", "warmup", "warmup_requests", "arrival", "shared_prefix", "seed",
                   "slo", "min_requests", "min_duration_s", "dataset", "api")
ARRIVAL_FIELDS = ("mode", "concurrency", "rate", "burstiness", "process", "max_concurrency")
_OPEN_ONLY = ("rate", "burstiness", "process", "max_concurrency")
PREFIX_FIELDS = ("fraction", "length", "groups")

#: ``with_overrides`` keyword -> the file field it replaces.
OVERRIDE_FIELDS: dict[str, str] = {
    "name": "name", "description": "description", "input_len": "input_len",
    "output_len": "output_len", "num_requests": "num_requests", "duration_s": "duration_s",
    "warmup": "warmup", "warmup_requests": "warmup_requests",
    "concurrency": "arrival.concurrency",
    "rate": "arrival.rate", "burstiness": "arrival.burstiness",
    "arrival_process": "arrival.process", "max_concurrency": "arrival.max_concurrency",
    "prefix_fraction": "shared_prefix.fraction", "prefix_length": "shared_prefix.length",
    "prefix_groups": "shared_prefix.groups", "seed": "seed", "slo": "slo",
    "min_requests": "min_requests", "min_duration_s": "min_duration_s",
}


# ---------------------------------------------------------------------------------- workload


@dataclass(frozen=True)
class Arrival:
    """How requests are released.

    ``mode = "closed"``: ``concurrency`` requests in flight, a new one sent when one completes.
    ``mode = "open"``: sends follow an
    :class:`~infer_prof.core.workload.arrivals.ArrivalProcess` at ``rate`` req/s (``inf`` = all at
    once) with ``process`` and ``burstiness``; ``max_concurrency`` (None = no cap) caps requests
    in flight, and time a request waits for a slot is reported separately.
    """

    mode: str = "closed"
    concurrency: int | None = 1
    rate: float | None = None
    burstiness: float = 1.0
    process: str = "poisson"
    max_concurrency: int | None = None

    @classmethod
    def closed(cls, concurrency: int) -> Arrival:
        """A closed loop with ``concurrency`` requests in flight."""
        return cls("closed", concurrency)

    @classmethod
    def open(cls, rate: float, *, burstiness: float = 1.0, process: str | None = None,
             max_concurrency: int | None = None) -> Arrival:
        """An open loop at ``rate`` req/s; ``process`` defaults to poisson (b = 1) or gamma."""
        chosen = process or ("poisson" if burstiness == 1 else "gamma")
        return cls("open", None, float(rate), float(burstiness), chosen, max_concurrency)

    def process_for(self) -> ArrivalProcess:
        """The arrival process of an open loop (raises ValueError for a closed loop)."""
        if self.mode != "open" or self.rate is None:
            raise ValueError("a closed loop has no arrival process")
        return ArrivalProcess(self.rate, self.process, self.burstiness)

    def record(self) -> ArrivalRecord:
        """The ``[arrival]`` table this was read from (defaults included; an open loop's
        ``max_concurrency`` left out when there is no cap)."""
        if self.mode == "closed":
            return ClosedArrivalRecord(concurrency=self.concurrency)
        return OpenArrivalRecord(
            rate=self.rate, burstiness=self.burstiness, process=self.process,
            max_concurrency=UNSET if self.max_concurrency is None else self.max_concurrency)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON values."""
        out: dict[str, Any] = msgspec.to_builtins(self.record())
        return out


@dataclass(frozen=True)
class SharedPrefix:
    """``fraction`` of the requests (rounded half-up to a count) start their prompt with one of
    ``groups`` shared prefixes of ``length`` tokens; the prefix is part of the drawn input
    length. All other prompts are unique, so the prefix cache only helps where asked to."""

    fraction: float = 0.0
    length: int = 0
    groups: int = 1

    def record(self) -> SharedPrefixRecord:
        """The ``[shared_prefix]`` table (every field written)."""
        return SharedPrefixRecord(fraction=self.fraction, length=self.length, groups=self.groups)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON values."""
        out: dict[str, Any] = msgspec.to_builtins(self.record())
        return out


@dataclass(frozen=True)
class Workload:
    """A named, validated description of the traffic of one run (see the module docstring).

    Exactly one of ``num_requests`` (measured requests, after ``warmup_requests``) and
    ``duration_s`` (seconds of measured load) is set. ``slo`` maps ``<metric>_<stat>``
    (metric: ttft, tpot, itl, e2e; stat: mean, max, pNN) to a limit in milliseconds.
    ``min_requests`` / ``min_duration_s``: a run with fewer completed measured requests or a
    shorter measured window is invalid (None = the runner's default). ``source`` names the file
    (or "<code>") for error messages and is not compared.
    """

    name: str
    input_len: LengthDistribution
    output_len: LengthDistribution
    description: str = ""
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    warmup: str = "steady"
    arrival: Arrival = field(default_factory=Arrival)
    shared_prefix: SharedPrefix = field(default_factory=SharedPrefix)
    seed: int = 0
    slo: dict[str, float] = field(default_factory=dict)
    min_requests: int | None = None
    min_duration_s: float | None = None
    dataset: str | None = None  # a dataset file the prompts come from (see loadgen.datasets)
    api: str | None = None  # "completions" or "chat" (None: completions, or --api)
    source: str = field(default="<code>", compare=False)

    def __post_init__(self) -> None:
        _parse_workload(self.to_dict(), self.source, None)

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Any, source: str = "<workload>",
                  default_name: str | None = None) -> Workload:
        """Validate a parsed workload file and build the workload.

        ``source`` (usually the file path) starts every error message; ``default_name`` is used
        when the file has no ``name`` (the loader passes the file's stem).
        """
        return cls(**_parse_workload(d, source, default_name))

    def record(self) -> WorkloadRecord:
        """The workload as a typed file mapping (a result's ``workload`` section); unset
        optional fields (None, an empty ``slo``) are left out."""
        return WorkloadRecord(
            name=self.name, description=self.description,
            input_len=self.input_len.record(), output_len=self.output_len.record(),
            num_requests=_or_unset(self.num_requests), duration_s=_or_unset(self.duration_s),
            warmup=self.warmup, warmup_requests=self.warmup_requests,
            arrival=self.arrival.record(), shared_prefix=self.shared_prefix.record(),
            seed=self.seed, slo=dict(self.slo) if self.slo else UNSET,
            min_requests=_or_unset(self.min_requests),
            min_duration_s=_or_unset(self.min_duration_s), dataset=_or_unset(self.dataset),
            api=UNSET if self.api is None else cast(ApiKind, self.api))

    def to_dict(self) -> dict[str, Any]:
        """The workload as a file mapping (``from_dict(w.to_dict())`` gives ``w`` back): its
        :meth:`record` as JSON values. Suitable for result files."""
        out: dict[str, Any] = msgspec.to_builtins(self.record())
        return out

    # -- changing -----------------------------------------------------------------------------
    def with_overrides(self, **cli_values: Any) -> Workload:
        """A copy with command-line values replacing fields; a value of None keeps the field.

        Keywords are the keys of :data:`OVERRIDE_FIELDS`. ``input_len``/``output_len`` take a
        whole number (fixed), a mapping or a distribution. ``concurrency`` makes the run a closed
        loop, ``rate`` an open loop (keeping the file's burstiness/process/max_concurrency when it
        already was one); giving both is an error. ``burstiness`` other than 1 with no
        ``arrival_process`` switches a poisson process to gamma. ``num_requests`` clears
        ``duration_s`` and the reverse. ``slo`` replaces the whole mapping. The result is
        validated again; errors name the field and the override it came from.
        """
        unknown = sorted(set(cli_values) - set(OVERRIDE_FIELDS))
        if unknown:
            raise TypeError(f"unknown override(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(OVERRIDE_FIELDS)}")
        given = {k: v for k, v in cli_values.items() if v is not None}
        if not given:
            return self
        suffix = " with overrides"
        source = self.source if self.source.endswith(suffix) else self.source + suffix
        d = self.to_dict()
        for key in ("name", "description", "warmup", "warmup_requests", "seed", "min_requests",
                    "min_duration_s"):
            if key in given:
                d[key] = given[key]
        if "warmup_requests" in given and "warmup" not in given:
            d["warmup"] = "requests"  # a request count given alone is an explicit choice
        for key in ("input_len", "output_len"):
            if key in given:
                v = given[key]
                d[key] = v.to_dict() if isinstance(v, LengthDistribution) else v
        if "num_requests" in given and "duration_s" in given:
            raise WorkloadError(source, "duration_s", "override num_requests or duration_s, "
                                                      "not both")
        if "num_requests" in given:
            d.pop("duration_s", None)
            d["num_requests"] = given["num_requests"]
        if "duration_s" in given:
            d.pop("num_requests", None)
            d["duration_s"] = given["duration_s"]
        d["arrival"] = _override_arrival(source, d["arrival"], given)
        sp = d["shared_prefix"]
        for key, sub in (("prefix_fraction", "fraction"), ("prefix_length", "length"),
                         ("prefix_groups", "groups")):
            if key in given:
                sp[sub] = given[key]
        if "slo" in given:
            d["slo"] = dict(given["slo"])
        try:
            return Workload.from_dict(d, source=source)
        except WorkloadError as exc:
            by_field = {v: k for k, v in OVERRIDE_FIELDS.items() if k in given}
            origin = by_field.get(exc.field)
            if origin is None:
                raise
            raise WorkloadError(source, f"{exc.field} (override {origin}={given[origin]!r})",
                                exc.problem) from None

    def scaled(self, length_factor: float) -> Workload:
        """The same workload with every length parameter times ``length_factor`` (shapes kept,
        no length below 1 token). The shared-prefix length is scaled too and kept below the
        smallest input length; when no room is left for it, sharing is turned off."""
        if length_factor == 1:
            return self
        inp = self.input_len.scaled(length_factor)
        out = self.output_len.scaled(length_factor)
        sp = self.shared_prefix
        if sp.fraction > 0:
            plen = min(max(1, math.floor(sp.length * length_factor + 0.5)),
                       inp.support()[0] - 1)
            sp = replace(sp, length=plen) if plen >= 1 else SharedPrefix()
        return replace(self, input_len=inp, output_len=out, shared_prefix=sp)

    # -- drawing ------------------------------------------------------------------------------
    def total_requests(self) -> int | None:
        """``warmup_requests + num_requests``, or None for a duration-bound workload."""
        if self.num_requests is None:
            return None
        return self.warmup_requests + self.num_requests


_T = TypeVar("_T")


def _or_unset(value: _T | None) -> _T | UnsetType:
    """``value``, or ``UNSET`` (the key left out of the file mapping) for None."""
    return UNSET if value is None else value


def _parse_workload(d: Any, source: str, default_name: str | None) -> dict[str, Any]:
    """Validate a workload mapping; return the keyword arguments of :class:`Workload`."""
    r = FieldReader(source)
    t = r.table(d, "", WORKLOAD_FIELDS)
    kind = t.get("kind", "workload")
    if kind != "workload":
        raise r.err("kind", f"must be 'workload' here (a suite is read with load_suite), "
                            f"got {kind!r}")
    if "name" in t:
        name = r.name(t["name"], "name")
    elif default_name is not None:
        name = r.name(default_name, "name")
    else:
        raise r.err("name", "missing; give the workload a name")
    description = r.string(t.get("description", ""), "description")
    for key in ("input_len", "output_len"):
        if key not in t:
            raise r.err(key, "missing; give a whole number of tokens or a table with kind = "
                             "fixed | uniform | normal | lognormal | empirical")
    input_len = r.length_dist(t["input_len"], "input_len")
    output_len = r.length_dist(t["output_len"], "output_len")

    num_requests = duration_s = None
    if "num_requests" in t and "duration_s" in t:
        raise r.err("duration_s", "give num_requests or duration_s, not both")
    if "num_requests" in t:
        num_requests = r.integer(t["num_requests"], "num_requests", 1)
    elif "duration_s" in t:
        duration_s = r.number(t["duration_s"], "duration_s", minimum=0.0, strict=True)
    else:
        raise r.err("num_requests", "missing; give num_requests (measured requests) or "
                                    "duration_s (seconds)")
    warmup = r.integer(t.get("warmup_requests", 0), "warmup_requests", 0)
    warmup_mode = _read_warmup_mode(
        r, t.get("warmup", "requests" if "warmup_requests" in t else "steady"))
    seed = r.integer(t.get("seed", 0), "seed", 0)
    arrival = _read_arrival(r, t.get("arrival", {"mode": "closed", "concurrency": 1}))
    if arrival.mode == "open" and arrival.rate == math.inf and duration_s is not None:
        raise r.err("arrival.rate", "an infinite rate sends every request at once: give "
                                    "num_requests instead of duration_s, or a finite rate")
    prefix = _read_prefix(r, t.get("shared_prefix", {}), input_len)
    slo = _read_slo(r, t.get("slo", {}))
    min_requests = (r.integer(t["min_requests"], "min_requests", 0)
                    if "min_requests" in t else None)
    min_duration = (r.number(t["min_duration_s"], "min_duration_s", minimum=0.0, strict=False)
                    if "min_duration_s" in t else None)
    dataset = r.string(t["dataset"], "dataset") if "dataset" in t else None
    if dataset is not None and not dataset.strip():
        raise r.err("dataset", "must be a file path (relative to the workload file), got ''")
    api = r.string(t["api"], "api") if "api" in t else None
    if api is not None and api not in API_KINDS:
        raise r.err("api", f"must be one of {', '.join(API_KINDS)}, got {api!r}")
    return {"name": name, "input_len": input_len, "output_len": output_len,
            "description": description, "num_requests": num_requests, "duration_s": duration_s,
            "warmup_requests": warmup, "warmup": warmup_mode, "arrival": arrival,
            "shared_prefix": prefix, "seed": seed,
            "slo": slo, "min_requests": min_requests, "min_duration_s": min_duration,
            "dataset": dataset, "api": api, "source": source}


WARMUP_MODES = ("steady", "requests")
#: The APIs a workload may ask for (``api``): ``/v1/completions`` or ``/v1/chat/completions``.
API_KINDS = ("completions", "chat")
_WARMUP_SECONDS_RE = re.compile(r"^(\d+(?:\.\d+)?)s$")


def warmup_seconds(mode: str) -> float | None:
    """The seconds of a duration warm-up (``"30s"`` -> 30.0); None for the other modes."""
    m = _WARMUP_SECONDS_RE.match(mode)
    return float(m.group(1)) if m else None


def _read_warmup_mode(r: FieldReader, value: Any) -> str:
    """``steady``: the load itself until every stream has finished one request (one full wave);
    ``requests``: ``warmup_requests`` first, all finished before measuring starts; ``<N>s``:
    the load itself for N seconds. Steady and duration warm-ups never pause the load."""
    if isinstance(value, str) and (value in WARMUP_MODES or warmup_seconds(value) is not None):
        return value
    raise r.err("warmup", f"must be 'steady', 'requests' or a duration such as '30s', "
                          f"got {value!r}")


def _read_arrival(r: FieldReader, value: Any) -> Arrival:
    a = r.table(value, "arrival", ARRIVAL_FIELDS)
    mode = a.get("mode", "open" if "rate" in a else "closed")
    if mode not in ("closed", "open"):
        raise r.err("arrival.mode", f"must be 'closed' or 'open', got {mode!r}")
    if mode == "closed":
        for key in _OPEN_ONLY:
            if key in a:
                hint = (" (a closed loop's cap is its concurrency)" if key == "max_concurrency"
                        else "")
                raise r.err(f"arrival.{key}", f"only for mode = 'open'{hint}")
        return Arrival.closed(r.integer(a.get("concurrency", 1), "arrival.concurrency", 1))
    if "concurrency" in a:
        raise r.err("arrival.concurrency", "only for mode = 'closed'; an open loop is capped "
                                           "with max_concurrency")
    if "rate" not in a:
        raise r.err("arrival.rate", "missing; an open loop needs a rate in requests/s (inf "
                                    "allowed)")
    rate = r.number(a["rate"], "arrival.rate", minimum=0.0, strict=True, allow_inf=True)
    b = r.number(a.get("burstiness", 1.0), "arrival.burstiness", minimum=0.0, strict=True)
    process = a.get("process", "poisson" if b == 1 else "gamma")
    if process not in ARRIVAL_KINDS:
        raise r.err("arrival.process", f"must be one of {', '.join(ARRIVAL_KINDS)}, got "
                                       f"{process!r}")
    if process != "gamma" and b != 1:
        raise r.err("arrival.burstiness", f"must be 1 for process {process!r}; use process = "
                                          "'gamma' for another burstiness")
    cap = (r.integer(a["max_concurrency"], "arrival.max_concurrency", 1)
           if "max_concurrency" in a else None)
    return Arrival("open", None, rate, b, process, cap)


def _override_arrival(source: str, arrival: dict[str, Any], given: Mapping[str, Any]
                      ) -> dict[str, Any]:
    if "concurrency" in given and "rate" in given:
        raise WorkloadError(source, "arrival", "override concurrency (closed loop) or rate "
                                               "(open loop), not both; max_concurrency caps an "
                                               "open loop")
    a = dict(arrival)
    if "concurrency" in given:
        a = {"mode": "closed", "concurrency": given["concurrency"]}
    if "rate" in given:
        if a.get("mode") != "open":
            a = {"mode": "open"}
        a["rate"] = given["rate"]
    for key, sub in (("burstiness", "burstiness"), ("arrival_process", "process"),
                     ("max_concurrency", "max_concurrency")):
        if key in given:
            a[sub] = given[key]
    if ("burstiness" in given and "arrival_process" not in given and given["burstiness"] != 1
            and a.get("process", "poisson") == "poisson"):
        a["process"] = "gamma"
    return a


def _read_prefix(r: FieldReader, value: Any, input_len: LengthDistribution) -> SharedPrefix:
    p = r.table(value, "shared_prefix", PREFIX_FIELDS)
    frac = r.number(p.get("fraction", 0.0), "shared_prefix.fraction", minimum=0.0, strict=False)
    if frac > 1:
        raise r.err("shared_prefix.fraction", f"must be between 0 and 1, got {frac:g}")
    length = r.integer(p.get("length", 0), "shared_prefix.length", 0)
    groups = r.integer(p.get("groups", 1), "shared_prefix.groups", 1)
    if frac > 0:
        smallest = input_len.support()[0]
        if length < 1:
            raise r.err("shared_prefix.length", "must be >= 1 token when fraction > 0")
        if length >= smallest:
            raise r.err("shared_prefix.length", f"must be below input_len's smallest value "
                                                f"({smallest}) so every prompt holds the prefix "
                                                f"and a unique suffix; got {length}")
    return SharedPrefix(frac, length, groups)


def _read_slo(r: FieldReader, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise r.err("slo", f"must be a table of <metric>_<stat> = milliseconds, got "
                           f"{type_name(value)} {value!r}")
    out: dict[str, float] = {}
    for key, limit in value.items():
        m = SLO_KEY_RE.match(str(key))
        pct_ok = m is not None and (m.group(3) is None or 0 < float(m.group(3)) < 100)
        if not pct_ok:
            raise r.err(f"slo.{key}", "unknown SLO; allowed: <metric>_<stat> with metric one of "
                                      f"{', '.join(SLO_METRICS)} and stat mean, max or pNN "
                                      "(0 < NN < 100), e.g. ttft_p99")
        out[str(key)] = r.number(limit, f"slo.{key}", minimum=0.0, strict=True)
    return out
