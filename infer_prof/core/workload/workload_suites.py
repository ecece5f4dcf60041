"""Suites: a list of member workloads, the load points each is swept over, and named scales
(``[scales.tiny]``) that shrink it, e.g. for CI on a tiny CPU model (``kind = "suite"`` files;
see :class:`Suite`). Pure: resolving member names to files is the caller's ``loader``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infer_prof.core.workload.workload_fields import FieldReader, WorkloadError, type_name
from infer_prof.core.workload.workloads import Workload

SUITE_FIELDS = ("kind", "name", "description", "members", "scales")
MEMBER_FIELDS = ("workload", "concurrency", "rate", "num_requests")
SCALE_FIELDS = ("length_factor", "num_requests", "warmup_requests", "min_requests",
                "min_duration_s", "concurrency", "rate")


@dataclass(frozen=True)
class SuiteMember:
    """One workload of a suite and the load points it is swept over: ``concurrency`` (closed
    loop) or ``rate`` (open loop) or neither (the workload's own arrival, one point)."""

    workload: str
    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()
    num_requests: int | None = None


@dataclass(frozen=True)
class SuiteScale:
    """A named way to shrink a suite. Every set field replaces the members' values:
    lengths times ``length_factor``; ``num_requests``/``warmup_requests`` per point; the
    validity minimums ``min_requests``/``min_duration_s``; ``concurrency`` the points of
    closed-loop members, ``rate`` those of open-loop members."""

    length_factor: float = 1.0
    num_requests: int | None = None
    warmup_requests: int | None = None
    min_requests: int | None = None
    min_duration_s: float | None = None
    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()


@dataclass(frozen=True)
class SuiteRun:
    """One member of an expanded suite: the workload (scaled) and the points to sweep."""

    workload: Workload
    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()

    def points(self) -> list[Workload]:
        """One concrete workload per load point, in the order given."""
        if self.concurrency:
            return [self.workload.with_overrides(concurrency=c) for c in self.concurrency]
        return [self.workload.with_overrides(rate=r) for r in self.rate]


@dataclass(frozen=True)
class Suite:
    """A list of members (a nightly run's content) and named scales; see ``workloads/README.md``."""

    name: str
    members: tuple[SuiteMember, ...]
    description: str = ""
    scales: dict[str, SuiteScale] = field(default_factory=dict)
    source: str = field(default="<code>", compare=False)

    @classmethod
    def from_dict(cls, d: Any, source: str = "<suite>",
                  default_name: str | None = None) -> Suite:
        """Validate a parsed suite file (``kind = "suite"``) and build the suite."""
        r = FieldReader(source)
        t = r.table(d, "", SUITE_FIELDS)
        if t.get("kind") != "suite":
            raise r.err("kind", f"must be 'suite' for a suite file, got {t.get('kind')!r}")
        raw_name = t.get("name", default_name)
        if raw_name is None:
            raise r.err("name", "missing; give the suite a name")
        name = r.name(raw_name, "name")
        description = r.string(t.get("description", ""), "description")
        raw_members = t.get("members")
        if not isinstance(raw_members, list) or not raw_members:
            raise r.err("members", "must be a non-empty list of [[members]] tables with a "
                                   "workload name or path")
        members = []
        for i, raw in enumerate(raw_members):
            f = f"members[{i}]"
            m = r.table(raw, f, MEMBER_FIELDS)
            if "workload" not in m:
                raise r.err(f"{f}.workload", "missing; give a workload name or path")
            wl = r.string(m["workload"], f"{f}.workload")
            if "concurrency" in m and "rate" in m:
                raise r.err(f"{f}.rate", "give concurrency (closed loop) or rate (open loop) "
                                         "points, not both")
            conc = r.int_list(m["concurrency"], f"{f}.concurrency", 1) if "concurrency" in m \
                else ()
            rate = r.rate_list(m["rate"], f"{f}.rate") if "rate" in m else ()
            nreq = (r.integer(m["num_requests"], f"{f}.num_requests", 1)
                    if "num_requests" in m else None)
            members.append(SuiteMember(wl, conc, rate, nreq))
        scales: dict[str, SuiteScale] = {}
        raw_scales = t.get("scales", {})
        if not isinstance(raw_scales, Mapping):
            raise r.err("scales", f"must be a table of [scales.<name>] tables, got "
                                  f"{type_name(raw_scales)}")
        for sname, raw in raw_scales.items():
            f = f"scales.{sname}"
            r.name(sname, f)
            s = r.table(raw, f, SCALE_FIELDS)
            scales[sname] = SuiteScale(
                length_factor=r.number(s.get("length_factor", 1.0), f"{f}.length_factor",
                                       minimum=0.0, strict=True),
                num_requests=(r.integer(s["num_requests"], f"{f}.num_requests", 1)
                              if "num_requests" in s else None),
                warmup_requests=(r.integer(s["warmup_requests"], f"{f}.warmup_requests", 0)
                                 if "warmup_requests" in s else None),
                min_requests=(r.integer(s["min_requests"], f"{f}.min_requests", 0)
                              if "min_requests" in s else None),
                min_duration_s=(r.number(s["min_duration_s"], f"{f}.min_duration_s",
                                         minimum=0.0, strict=False)
                                if "min_duration_s" in s else None),
                concurrency=(r.int_list(s["concurrency"], f"{f}.concurrency", 1)
                             if "concurrency" in s else ()),
                rate=r.rate_list(s["rate"], f"{f}.rate") if "rate" in s else (),
            )
        return cls(name, tuple(members), description, scales, source)

    def expand(self, loader: Callable[[str], Workload], scale: str | None = None
               ) -> list[SuiteRun]:
        """Resolve each member with ``loader(name_or_path)`` and apply its points and the
        named ``scale`` (None = full size). Member ``num_requests`` replaces the workload's
        count (and duration); the scale's values replace both."""
        sc = SuiteScale()
        if scale is not None:
            if scale not in self.scales:
                known = ", ".join(sorted(self.scales)) or "none defined"
                raise WorkloadError(self.source, "scales", f"no scale {scale!r}; known: {known}")
            sc = self.scales[scale]
        runs = []
        for i, m in enumerate(self.members):
            try:
                w = loader(m.workload)
            except WorkloadError:
                raise
            except (OSError, ValueError) as exc:
                raise WorkloadError(self.source, f"members[{i}].workload", str(exc)) from None
            w = w.scaled(sc.length_factor)
            nreq = sc.num_requests or m.num_requests
            w = w.with_overrides(num_requests=nreq, warmup_requests=sc.warmup_requests,
                                 min_requests=sc.min_requests, min_duration_s=sc.min_duration_s)
            conc, rate = m.concurrency, m.rate
            if not conc and not rate:
                if w.arrival.mode == "closed":
                    conc = (w.arrival.concurrency or 1,)
                else:
                    rate = (w.arrival.rate or math.inf,)
            if conc and sc.concurrency:
                conc = sc.concurrency
            if rate and sc.rate:
                rate = sc.rate
            runs.append(SuiteRun(w, conc, rate))
        return runs
