"""The network weight of job brokerage (seed 000 "Network weight"; jedi-inventory.md §6.5): the matrix of
links between sites and nuclei, and how one link weighs.

A link joins two places of the resource catalog -- a site (PanDA queue) or a nucleus -- and carries what
PanDA reads from its network weather service and from CRIC: the files queued on it, the FTS throughput
measured over the last hour, day and week, the CRIC closeness (0 best, 11 worst), and whether it is
blocked. `jedictl network import` fills the matrix (store/network.py, docs/sites.md "Network weight").

The figures are rough and old by the time a transfer starts, so the weight only classifies a link, from
1 (poor) to 2 (good):

    network weight    = q x queued weight + (1 - q) x throughput weight     q = nw_queue_importance (0.5)
    queued weight     = 2 - queued files / nqueued_sat_cap                  2 when idle, 1 at the cap
    throughput weight = a step of the newest FTS figure -- the last hour's, else the day's, else the week's
                        (1 at or under 1 MB/s up to 2 above 200 MB/s, `THROUGHPUT_STEPS`), or, when no
                        throughput was measured, the closeness normalised: 1 + (11 - closeness) / 11

A link the matrix lacks is taken as the worst one (nothing queued, closeness 11): PanDA penalises a
missing link rather than skipping the site. A site at the task's nucleus moves no output and weighs 2.5.
Which link a site's jobs depend on is `network_rule`'s question. Pure: nothing here reads the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jedictl.config import BrokerageSettings
from jedictl.engine.catalogs.network import MAX_CLOSENESS, MIN_CLOSENESS

#: A site at the task's nucleus: no output to move, better than any link (PanDA's 25 % boost over 2).
AT_NUCLEUS = 2.5
#: FTS throughput (MB/s) -> throughput weight: the first step the throughput is above, 1 under all of them.
THROUGHPUT_STEPS: tuple[tuple[float, float], ...] = (
    (200, 2.0), (100, 1.9), (75, 1.8), (50, 1.6), (20, 1.5), (10, 1.3), (2, 1.2), (1, 1.1),
)
#: The throughput figures of a link, newest window first: the newest one measured is used.
WINDOWS = ("mbps_1h", "mbps_1d", "mbps_1w")

OUTPUT = "output"  # the site's outputs go to the task's nucleus over the link
INPUT = "input"  # the site's missing input comes over the link from where the data is


@dataclass(frozen=True)
class NetworkLink:
    """A `network_matrix` row: the figures of one directed link."""

    source: str
    destination: str
    queued: int | None = None  # files queued on the link
    mbps_1h: float | None = None  # FTS throughput, MB/s, over the last hour / day / week
    mbps_1d: float | None = None
    mbps_1w: float | None = None
    closeness: int | None = None  # CRIC closeness, 0 (best) .. 11 (worst)
    blocked: bool = False

    def throughput(self) -> tuple[str, float] | None:
        """The newest throughput measured (window, MB/s), or None."""
        for window in WINDOWS:
            value = getattr(self, window)
            if value is not None:
                return window, float(value)
        return None

    @property
    def name(self) -> str:
        return f"{self.source} -> {self.destination}"


def link_from_row(row: Mapping[str, Any]) -> NetworkLink:
    def number(key: str) -> float | None:
        return None if row.get(key) is None else float(row[key])

    return NetworkLink(source=row["source"], destination=row["destination"], queued=row.get("queued"),
                       mbps_1h=number("mbps_1h"), mbps_1d=number("mbps_1d"), mbps_1w=number("mbps_1w"),
                       closeness=row.get("closeness"), blocked=bool(row.get("blocked")))


def _no_links() -> Mapping[tuple[str, str], NetworkLink]:
    return MappingProxyType({})


@dataclass(frozen=True)
class NetworkMatrix:
    """Every link, by (source, destination). An empty matrix means no network figures at all: then
    brokerage has no network term (the weights stay as they were before any import)."""

    links: Mapping[tuple[str, str], NetworkLink] = field(default_factory=_no_links)

    def __bool__(self) -> bool:
        return bool(self.links)

    def __len__(self) -> int:
        return len(self.links)

    def find(self, sources: Iterable[str], destinations: Sequence[str]) -> NetworkLink | None:
        """The first link from one of `sources` to one of `destinations`, both tried in their order (the
        most specific name first: a site's own link before its nucleus')."""
        for source in sources:
            for destination in destinations:
                link = self.links.get((source, destination))
                if link is not None:
                    return link
        return None

    def queued_to(self) -> dict[str, int]:
        """Files queued towards each destination, summed over the links into it: the output transfer
        queue of a nucleus that task brokerage checks (seed 000 "Task brokerage")."""
        totals: dict[str, int] = {}
        for link in self.links.values():
            if link.queued:
                totals[link.destination] = totals.get(link.destination, 0) + link.queued
        return totals


NO_NETWORK = NetworkMatrix()


def matrix_from_rows(rows: Iterable[Mapping[str, Any]]) -> NetworkMatrix:
    links = {(link.source, link.destination): link for link in map(link_from_row, rows)}
    return NetworkMatrix(MappingProxyType(links))


# ---------------------------------------------------------------------------------------- weights

def queued_weight(queued: int | None, cap: int) -> float:
    """2 for an idle link, 1 at the cap; never below 0 (a link past twice the cap, kept only because a
    pre-assigned site skips the link rules, must not make a weight negative)."""
    return max(0.0, 2.0 - (queued or 0) / cap)


def throughput_weight(mbps: float) -> float:
    for floor, weight in THROUGHPUT_STEPS:
        if mbps > floor:
            return weight
    return 1.0


def closeness_weight(closeness: int) -> float:
    """The closeness fallback: 2 for the closest link (0), 1 for the farthest (11)."""
    return 1.0 + (MAX_CLOSENESS - closeness) / (MAX_CLOSENESS - MIN_CLOSENESS)


@dataclass(frozen=True)
class NetworkTerm:
    """The network factor of one site's brokerage weight and where it comes from.

    `basis` says what the throughput weight rests on: a throughput window (`mbps_1h`, `mbps_1d`,
    `mbps_1w`), `closeness` (no throughput measured), `worst` (neither: closeness 11 assumed), or
    `nucleus` (the site is at the task's nucleus: no link at all). `link` is the matrix row used; None
    at the nucleus or when the matrix has no link (`wanted` then names the link that was looked for)."""

    direction: str  # OUTPUT | INPUT
    weight: float
    basis: str
    link: NetworkLink | None = None
    queued_weight: float | None = None
    throughput_weight: float | None = None
    wanted: str = ""  # the link looked for, "A -> B" (several sources: "A|B -> C")

    @property
    def at_nucleus(self) -> bool:
        return self.basis == "nucleus"

    def text(self, settings: BrokerageSettings) -> str:
        """One line for `explain`: the weight and the figures behind it."""
        if self.at_nucleus:
            return f"{self.weight:g}: at the nucleus {self.wanted.split(' -> ')[-1]} (no output to transfer)"
        link = self.link
        q = settings.nw_queue_importance
        queued = (link.queued or 0) if link is not None else 0
        parts = f"{q:g} x queued {self.queued_weight:.3g} ({queued} files) + {1 - q:g} x "
        if self.basis in WINDOWS and link is not None:
            mbps = getattr(link, self.basis)
            parts += f"throughput {self.throughput_weight:.3g} ({mbps:g} MB/s, {self.basis[5:]})"
        elif self.basis == "closeness" and link is not None:
            parts += f"closeness {self.throughput_weight:.3g} (closeness {link.closeness}, no throughput measured)"
        else:
            parts += f"closeness {self.throughput_weight:.3g} (closeness {MAX_CLOSENESS} assumed)"
        where = f"{self.direction} {link.name}" if link is not None else f"{self.direction}: no link {self.wanted} (worst assumed)"
        blocked = " [blocked]" if link is not None and link.blocked else ""
        return f"{self.weight:.3g} = {parts}; {where}{blocked}"

    def numbers(self) -> dict[str, Any]:
        """What the brokerage trail records (the rest is in `text`)."""
        return {"network_weight": round(self.weight, 4)}


def link_term(link: NetworkLink | None, direction: str, wanted: str, settings: BrokerageSettings) -> NetworkTerm:
    """How one link weighs (None: the matrix has no such link -- the worst one)."""
    measured = link.throughput() if link is not None else None
    if measured is not None:
        basis, through = measured[0], throughput_weight(measured[1])
    elif link is not None and link.closeness is not None:
        basis, through = "closeness", closeness_weight(link.closeness)
    else:
        basis, through = "worst", closeness_weight(MAX_CLOSENESS)
    queued = queued_weight(link.queued if link is not None else 0, settings.nqueued_sat_cap)
    q = settings.nw_queue_importance
    return NetworkTerm(direction, q * queued + (1 - q) * through, basis, link, queued, through, wanted)


def output_term(site_names: Sequence[str], nucleus: str, at_nucleus: bool, matrix: NetworkMatrix,
                settings: BrokerageSettings) -> NetworkTerm:
    """A WORLD task's outputs are collected at its nucleus: the link from the site to the nucleus."""
    wanted = f"{site_names[0]} -> {nucleus}"
    if at_nucleus:
        return NetworkTerm(OUTPUT, AT_NUCLEUS, "nucleus", wanted=wanted)
    return link_term(matrix.find(site_names, (nucleus,)), OUTPUT, wanted, settings)


def usable(link: NetworkLink | None, settings: BrokerageSettings) -> bool:
    """A link brokerage may send work over: not blocked, fewer files queued than NQUEUED_SAT_CAP (a
    missing link is not known to be unusable)."""
    return link is None or (not link.blocked and (link.queued or 0) < settings.nqueued_sat_cap)


def input_term(site_names: Sequence[str], sources: Sequence[str], matrix: NetworkMatrix,
               settings: BrokerageSettings) -> NetworkTerm:
    """An analysis job's missing input comes from wherever the data is: the best link from one of
    `sources` (the places holding the input, in order) to the site -- usable links first."""
    best: NetworkTerm | None = None
    for source in sources:
        link = matrix.find((source,), site_names)
        if link is None:
            continue
        term = link_term(link, INPUT, link.name, settings)
        if best is None or (usable(link, settings), term.weight) > (usable(best.link, settings), best.weight):
            best = term
    if best is None:
        shown = "|".join(sources[:3]) + ("|..." if len(sources) > 3 else "") if sources else "?"
        best = link_term(None, INPUT, f"{shown} -> {site_names[0]}", settings)
    return best


def describe_link(link: NetworkLink, settings: BrokerageSettings) -> dict[str, Any]:
    """A link as `network list` and `network show` print it: its figures and how brokerage weighs it."""
    term = link_term(link, OUTPUT, link.name, settings)
    if link.blocked:
        state = "blocked"
    elif (link.queued or 0) >= settings.nqueued_sat_cap:
        state = f"full ({link.queued} queued >= {settings.nqueued_sat_cap})"
    else:
        state = "usable"
    return {"source": link.source, "destination": link.destination, "queued": link.queued,
            "mbps_1h": link.mbps_1h, "mbps_1d": link.mbps_1d, "mbps_1w": link.mbps_1w, "closeness": link.closeness,
            "blocked": link.blocked, "weight": round(term.weight, 4), "queued_weight": round(term.queued_weight or 0, 4),
            "throughput_weight": round(term.throughput_weight or 0, 4), "basis": term.basis, "state": state}
