"""The price catalog: GPU rental and purchase prices, and choosing the price a run is costed at.

The catalog is a CSV file. The one shipped in ``infer_prof/catalog/data/prices.csv`` is seeded from
the GPU comparison articles the project grew from; users edit it or pass their own
(``--prices FILE``).
Columns (a header row names them; their order is free; extra columns are ignored)::

    provider                 who sells it: runpod, lambda, street (a purchase price), ...
    gpu                      a canonical GPU key (RTX-4090, A100-80GB-SXM, H100-SXM, ...); spaces,
                             dashes, underscores and case are forgiven
    gpu_count                GPUs in the listing (an 8-GPU node is priced as a whole); default 1
    on_demand_usd_per_hour   the listing's on-demand price, for all gpu_count GPUs  (may be empty)
    spot_usd_per_hour        the listing's spot/interruptible price, likewise       (may be empty)
    purchase_usd             the price to buy the listing outright                  (may be empty)
    source                   where the figure comes from
    date                     when it was quoted: YYYY, YYYY-MM or YYYY-MM-DD        (may be empty)
    note                     optional free text

A row needs at least one of the three prices. Prices in a :class:`PriceQuote` are for ONE GPU
(the listing's price divided by its ``gpu_count``); the cost arithmetic multiplies by the GPUs a
run uses (``infer_prof.core.catalog.prices``).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from infer_prof.catalog.gpus import CANONICAL_GPU_KEYS, match_gpu_name
from infer_prof.core.messages import OneLineError

SHIPPED_PRICES = "prices.csv"

# CANONICAL_GPU_KEYS (imported above): the keys a price row may name, the GPU catalog's.

REQUIRED_COLUMNS: tuple[str, ...] = (
    "provider",
    "gpu",
    "gpu_count",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "purchase_usd",
    "source",
    "date",
)
OPTIONAL_COLUMNS: tuple[str, ...] = ("note",)

_DATE_RE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")

PriceKind = Literal["on-demand", "spot", "user"]


class PriceError(ValueError):
    """No price can be chosen (unknown GPU, no row for it); the message says what to do instead."""


class PriceFileError(OneLineError):
    """A price file that cannot be read: one line naming the file, the line, the field and
    what to write instead."""


def _squash(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).lower()


_BY_SQUASHED = {_squash(k): k for k in CANONICAL_GPU_KEYS}


def canonical_gpu_key(name: str) -> str | None:
    """The GPU catalog key for a GPU name, ignoring case, spaces, dashes and underscores, or
    one of the catalog's aliases and NVML names; else None.

    ``canonical_gpu_key("rtx 4090") == "RTX-4090"``;
    ``canonical_gpu_key("h100_sxm") == "H100-SXM"``; ``canonical_gpu_key("H100") == "H100-SXM"``.
    """
    key = _BY_SQUASHED.get(_squash(name))
    if key is None:
        spec = match_gpu_name(name)
        key = spec.key if spec else None
    return key


@dataclass(frozen=True)
class PriceRow:
    """One catalog listing. Prices are for the whole listing (``gpu_count`` GPUs)."""

    provider: str
    gpu: str
    gpu_count: int
    on_demand_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    purchase_usd: float | None
    source: str
    date: str | None
    note: str | None
    line: int  # line of the CSV file the row came from (the header is line 1)

    def per_gpu(self, field: str) -> float | None:
        """The listing's ``field`` price divided by ``gpu_count`` (USD/hour or USD per GPU)."""
        value: float | None = getattr(self, field)
        return None if value is None else value / self.gpu_count

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict, plus per-GPU prices."""
        out = asdict(self)
        out["on_demand_usd_per_gpu_hour"] = self.per_gpu("on_demand_usd_per_hour")
        out["spot_usd_per_gpu_hour"] = self.per_gpu("spot_usd_per_hour")
        out["purchase_usd_per_gpu"] = self.per_gpu("purchase_usd")
        return out


@dataclass(frozen=True)
class PriceCatalog:
    """The rows of one price file and where they came from (``origin``: path or shipped name)."""

    rows: tuple[PriceRow, ...]
    origin: str

    def gpus(self) -> list[str]:
        """GPU keys that have at least one row, sorted."""
        return sorted({r.gpu for r in self.rows})

    def providers(self, gpu: str | None = None) -> list[str]:
        """Providers (of one GPU when given), sorted."""
        return sorted({r.provider for r in self.rows if gpu is None or r.gpu == gpu})


@dataclass(frozen=True)
class PriceQuote:
    """The price a run is costed at: USD per hour for ONE GPU, and where it came from.

    ``kind`` is "on-demand", "spot" or "user" (``--price-per-hour``); ``reason`` says in words why
    this price was chosen.
    """

    usd_per_hour: float
    gpu: str | None
    provider: str
    source: str
    date: str | None
    kind: PriceKind
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the quote."""
        return asdict(self)


@dataclass(frozen=True)
class PurchaseQuote:
    """A purchase price for ONE GPU (USD), for the owned-hardware arithmetic."""

    usd: float
    gpu: str
    provider: str
    source: str
    date: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the quote."""
        return asdict(self)


# --------------------------------------------------------------------------- loading


def load_prices(path: str | Path | None = None) -> PriceCatalog:
    """Load a price CSV: the shipped catalog when ``path`` is None, else the user's file.

    Raises :class:`PriceFileError` (a ValueError) naming the file, the line and the field for
    anything malformed, and for a file that cannot be read.
    """
    if path is None:
        data = resources.files("infer_prof.catalog.data")
        text = data.joinpath(SHIPPED_PRICES).read_text("utf-8")
        return parse_prices_csv(text, origin=f"infer_prof/catalog/data/{SHIPPED_PRICES}")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise PriceFileError(f"{p}: cannot read the price file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise PriceFileError(f"{p}: not a UTF-8 text file; a price file is CSV text") from None
    return parse_prices_csv(text, origin=str(p))


def parse_prices_csv(text: str, origin: str = "<prices>") -> PriceCatalog:
    """Parse price-catalog CSV text (see the module docstring for the columns).

    Errors are PriceFileError("ORIGIN line N, field 'F': what is wrong; what to write instead").
    Blank lines are skipped. Every row's ``gpu`` is turned into its canonical key.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise PriceFileError(
            f"{origin} line 1: empty file; expected a header row naming "
            f"{', '.join(REQUIRED_COLUMNS)}"
        ) from None
    except csv.Error as exc:
        raise PriceFileError(f"{origin} line 1: not valid CSV ({exc})") from None
    names = [h.strip().lower() for h in header]
    for col in REQUIRED_COLUMNS:
        if col not in names:
            raise PriceFileError(
                f"{origin} line 1, field {col!r}: the header lacks this column; "
                f"the header must name {', '.join(REQUIRED_COLUMNS)}"
            )
    index = {n: i for i, n in enumerate(names)}
    rows: list[PriceRow] = []
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise PriceFileError(
                f"{origin} line {reader.line_num}: not valid CSV ({exc})"
            ) from None
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(names):
            raise PriceFileError(
                f"{origin} line {line}: {len(cells)} fields but the header names {len(names)}; "
                "quote a value that contains a comma"
            )
        rows.append(_parse_row(cells, index, origin, line))
    return PriceCatalog(rows=tuple(rows), origin=origin)


def _parse_row(cells: list[str], index: dict[str, int], origin: str, line: int) -> PriceRow:
    def cell(col: str) -> str:
        i = index.get(col)
        return cells[i].strip() if i is not None and i < len(cells) else ""

    def fail(col: str, why: str) -> PriceFileError:
        return PriceFileError(f"{origin} line {line}, field {col!r}: {why}")

    provider = cell("provider")
    if not provider:
        raise fail("provider", "empty; name who sells it (e.g. runpod), or 'street' for a purchase")
    raw_gpu = cell("gpu")
    gpu = canonical_gpu_key(raw_gpu)
    if gpu is None:
        raise fail(
            "gpu", f"{raw_gpu!r} is not a known GPU key; use one of {', '.join(CANONICAL_GPU_KEYS)}"
        )
    raw_count = cell("gpu_count") or "1"
    try:
        count = int(raw_count)
    except ValueError:
        raise fail("gpu_count", f"{raw_count!r} is not a whole number of GPUs") from None
    if count < 1:
        raise fail("gpu_count", f"{count} GPUs; a listing has at least 1")

    def money(col: str) -> float | None:
        raw = cell(col).lstrip("$")
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise fail(
                col, f"{cell(col)!r} is not a number (write e.g. 1.39, no thousands separator)"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise fail(col, f"{cell(col)!r} must be a finite number >= 0")
        return value

    on_demand = money("on_demand_usd_per_hour")
    spot = money("spot_usd_per_hour")
    purchase = money("purchase_usd")
    if on_demand is None and spot is None and purchase is None:
        raise fail(
            "on_demand_usd_per_hour",
            "the row has no price; fill on_demand_usd_per_hour, spot_usd_per_hour or purchase_usd",
        )
    date = cell("date") or None
    if date is not None and not _DATE_RE.match(date):
        raise fail("date", f"{date!r} is not a date; write YYYY, YYYY-MM or YYYY-MM-DD")
    source = cell("source") or f"{origin} line {line}"
    return PriceRow(
        provider=provider,
        gpu=gpu,
        gpu_count=count,
        on_demand_usd_per_hour=on_demand,
        spot_usd_per_hour=spot,
        purchase_usd=purchase,
        source=source,
        date=date,
        note=cell("note") or None,
        line=line,
    )


# --------------------------------------------------------------------------- choosing


def _resolve_gpu(catalog: PriceCatalog, gpu_key: str) -> str:
    gpu = canonical_gpu_key(gpu_key)
    if gpu is None:
        raise PriceError(
            f"unknown GPU {gpu_key!r}; use one of {', '.join(CANONICAL_GPU_KEYS)}, "
            "or give --price-per-hour"
        )
    return gpu


def _pick(
    catalog: PriceCatalog, gpu: str, provider: str | None, field: str, what: str
) -> tuple[PriceRow, float, str]:
    """The row with the lowest per-GPU ``field`` price; single-GPU listings are preferred."""
    rows = [r for r in catalog.rows if r.gpu == gpu and getattr(r, field) is not None]
    if provider is not None:
        wanted = _squash(provider)
        rows = [r for r in rows if _squash(r.provider) == wanted]
    if not rows:
        have = catalog.providers(gpu)
        if provider is not None and have:
            hint = f"providers with {gpu} rows: {', '.join(have)}"
        else:
            priced = sorted({r.gpu for r in catalog.rows if getattr(r, field) is not None})
            hint = f"GPUs with {what} prices: {', '.join(priced) or 'none'}"
        by = f" from provider {provider!r}" if provider is not None else ""
        raise PriceError(
            f"no {what} price for {gpu}{by} in {catalog.origin} ({hint}); "
            "give --price-per-hour, or add a row with --prices FILE"
        )
    singles = [r for r in rows if r.gpu_count == 1]
    pool = singles or rows
    best = min(pool, key=lambda r: (r.per_gpu(field), r.provider, r.line))
    price = best.per_gpu(field)
    assert price is not None
    reason = f"lowest {what} price per GPU among {len(pool)} "
    reason += "single-GPU " if singles else ""
    reason += f"listing(s) for {gpu}"
    reason += f" from provider {best.provider}" if provider is not None else ""
    reason += f" in {catalog.origin} (line {best.line})"
    if best.gpu_count > 1:
        reason += f"; {best.gpu_count}-GPU listing divided by {best.gpu_count}"
    return best, price, reason


def select_price(
    catalog: PriceCatalog,
    gpu_key: str | None,
    provider: str | None = None,
    price_per_hour: float | None = None,
    spot: bool = False,
) -> PriceQuote:
    """Choose the hourly price of ONE GPU a run is costed at.

    - ``price_per_hour`` given (``--price-per-hour``): that price, kind "user", source "user"; the
      catalog is not consulted and ``gpu_key`` may be None.
    - else the catalog rows for ``gpu_key`` (canonical key, forgiving spelling), of ``provider``
      when given (case-insensitive), with an on-demand price (a spot price when ``spot``); of
      those, single-GPU listings when there are any; the lowest price per GPU (listing price /
      gpu_count) wins. ``reason`` says which was chosen and why.

    Raises PriceError (a ValueError) when no price can be chosen, naming what the catalog has.
    """
    if price_per_hour is not None:
        if not math.isfinite(price_per_hour) or price_per_hour <= 0:
            raise PriceError(f"--price-per-hour must be a positive number, got {price_per_hour}")
        gpu = canonical_gpu_key(gpu_key) if gpu_key else None
        return PriceQuote(
            usd_per_hour=float(price_per_hour),
            gpu=gpu or gpu_key,
            provider=provider or "user",
            source="user",
            date=None,
            kind="user",
            reason="given with --price-per-hour",
        )
    if not gpu_key:
        raise PriceError("no GPU to look a price up for; give --gpu or --price-per-hour")
    gpu = _resolve_gpu(catalog, gpu_key)
    field = "spot_usd_per_hour" if spot else "on_demand_usd_per_hour"
    kind: PriceKind = "spot" if spot else "on-demand"
    row, price, reason = _pick(catalog, gpu, provider, field, kind)
    return PriceQuote(
        usd_per_hour=price,
        gpu=gpu,
        provider=row.provider,
        source=row.source,
        date=row.date,
        kind=kind,
        reason=reason,
    )


def select_purchase(
    catalog: PriceCatalog, gpu_key: str, provider: str | None = None
) -> PurchaseQuote:
    """Choose the purchase price of ONE GPU (USD) for the owned-hardware arithmetic.

    Same rule as :func:`select_price` on the ``purchase_usd`` column: rows for the GPU (and
    provider), single-GPU listings preferred, the lowest per GPU wins. Raises PriceError when none.
    """
    gpu = _resolve_gpu(catalog, gpu_key)
    row, price, reason = _pick(catalog, gpu, provider, "purchase_usd", "purchase")
    return PurchaseQuote(
        usd=price, gpu=gpu, provider=row.provider, source=row.source, date=row.date, reason=reason
    )


def default_rows(catalog: PriceCatalog) -> set[int]:
    """Lines of the rows :func:`select_price` picks by default (no provider, on-demand), per GPU."""
    lines: set[int] = set()
    for gpu in catalog.gpus():
        try:
            row, _, _ = _pick(catalog, gpu, None, "on_demand_usd_per_hour", "on-demand")
        except PriceError:
            continue
        lines.add(row.line)
    return lines
