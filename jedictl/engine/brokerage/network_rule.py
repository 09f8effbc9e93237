"""Which network link a site's jobs depend on, and the link rules of job brokerage (seed 000 "Job
brokerage explained" steps 3 and 4, "Network weight"; jedi-inventory.md §6.5). How a link weighs is
`network`'s business.

- A task with a nucleus (WORLD production) has its outputs collected at the nucleus: a site's term is the
  link site -> nucleus. A site of the nucleus itself weighs 2.5: it moves no output.
- An analysis task's outputs stay where its jobs ran, but a job sent to a site without its input waits
  for a transfer (docs/analysis.md): such a site's term is the best link from where the data is to it.
  A site that holds the data moves nothing and gets no term -- brokerage never weighs it against a
  transfer site, so nothing is lost.
- Other tasks get no term, and neither does anyone while the matrix is empty.

A place goes by several names on the matrix, the most specific first: a site by its own name, then its
nucleus' (the ATLAS site the queue belongs to: one link per nucleus serves all its queues); data at a
storage endpoint is at the endpoint's nucleus and at every site that reads or writes the endpoint.

The rules, applied when `brokerage.nw_active` is on and the task is not pinned to its site (JEDI skips
the link checks for a pre-assigned site):
- a blocked link, or one with `nqueued_sat_cap` files queued or more, is not used (seed 000 step 3:
  "skip blacklisted satellite links or satellites with over max_queued files queued to the nucleus");
- an urgent task (processingType urgent) or one of priority >= 1000 with a nucleus needs a network weight
  of at least `nw_threshold` x `nw_weight_multiplier` (seed 000 step 3). JEDI checks it for WORLD tasks
  only, and so does jedictl: analysis tasks start at priority 1000 in PanDA as in jedictl, so the rule
  would drop every transfer site of every analysis task.
Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType

from jedictl.config import BrokerageSettings
from jedictl.engine.brokerage.filters import NO_LOCALITY, SiteLocality
from jedictl.engine.brokerage.model import BrokerageCatalog, ChunkInput, Drop, Site, TaskRequirements
from jedictl.engine.brokerage.network import NetworkTerm, input_term, output_term

RULE = "network"


def site_names(site: Site) -> tuple[str, ...]:
    """The names a site goes by on the matrix: its own, then its nucleus'."""
    return (site.name,) + ((site.nucleus,) if site.nucleus and site.nucleus != site.name else ())


def data_places(catalog: BrokerageCatalog) -> dict[str, tuple[str, ...]]:
    """Per storage endpoint, the places its data is at: the endpoint's nucleus, then the sites that read
    or write it (by name)."""
    users: dict[str, set[str]] = {}
    for site in catalog.sites:
        for name in (*site.read_endpoints, *site.write_endpoints):
            users.setdefault(name, set()).add(site.name)
    places: dict[str, tuple[str, ...]] = {}
    for name in users.keys() | catalog.endpoints.keys():
        endpoint = catalog.endpoints.get(name)
        nucleus = (endpoint.nucleus,) if endpoint is not None and endpoint.nucleus else ()
        places[name] = nucleus + tuple(sorted(users.get(name, ())))
    return places


def input_sources(chunk: ChunkInput, local: SiteLocality, catalog: BrokerageCatalog,
                  places: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Where the input a site lacks can come from: the places of every endpoint holding one of the files
    missing from the site's disk (an endpoint blacklisted for reading serves nothing)."""
    missing = frozenset(range(chunk.n_files)) - local.disk_files
    names: list[str] = []
    for endpoint_name in sorted(chunk.replicas):
        if not chunk.replicas[endpoint_name] & missing:
            continue
        endpoint = catalog.endpoints.get(endpoint_name)
        if endpoint is not None and endpoint.blacklisted_read:
            continue
        names.extend(places.get(endpoint_name, ()))
    return tuple(dict.fromkeys(names))


def network_terms(
    sites: Sequence[Site],
    task: TaskRequirements,
    chunk: ChunkInput,
    catalog: BrokerageCatalog,
    locality: Mapping[str, SiteLocality],
    nucleus_sites: Collection[str],
    transfer_sites: Collection[str],
    settings: BrokerageSettings,
) -> Mapping[str, NetworkTerm]:
    """The network term of each site that has one (see the module's docstring). `transfer_sites` are
    the analysis sites whose jobs would wait for their input (the data placement's `transfer`)."""
    matrix = catalog.network
    if not matrix or not sites:
        return MappingProxyType({})
    if task.nucleus:
        return MappingProxyType({site.name: output_term(site_names(site), task.nucleus, site.name in nucleus_sites, matrix, settings)
                                 for site in sites})
    if not transfer_sites:
        return MappingProxyType({})
    places = data_places(catalog)
    return MappingProxyType({
        site.name: input_term(site_names(site), input_sources(chunk, locality.get(site.name, NO_LOCALITY), catalog, places),
                              matrix, settings)
        for site in sites if site.name in transfer_sites
    })


def link_refusal(term: NetworkTerm, settings: BrokerageSettings, *, express: bool) -> Drop | None:
    """Why brokerage may not send the site's work over its link, or None (`express`: the task is urgent
    or of priority >= 1000 and has a nucleus)."""
    link = term.link
    if link is not None and link.blocked:
        return Drop(f"network: link {link.name} is blocked", {"link": link.name, "blocked": True})
    if link is not None and (link.queued or 0) >= settings.nqueued_sat_cap:
        return Drop(f"network: {link.queued} files queued on {link.name} >= {settings.nqueued_sat_cap} (nqueued_sat_cap)",
                    {"link": link.name, "queued": link.queued, "cap": settings.nqueued_sat_cap})
    threshold = settings.nw_threshold * settings.nw_weight_multiplier
    if express and term.weight < threshold:
        return Drop(f"network: weight {term.weight:.3g} < {threshold:g} (nw_threshold x nw_weight_multiplier) "
                    f"for an urgent or priority >= 1000 task ({term.wanted})",
                    {"network_weight": round(term.weight, 4), "threshold": threshold, "basis": term.basis})
    return None


def apply_link_rules(sites: Sequence[Site], terms: Mapping[str, NetworkTerm], settings: BrokerageSettings, *,
                     express: bool) -> tuple[list[Site], list[tuple[Site, Drop]]]:
    """The sites whose link may carry their work, and the others with the reason."""
    kept: list[Site] = []
    dropped: list[tuple[Site, Drop]] = []
    for site in sites:
        term = terms.get(site.name)
        drop = link_refusal(term, settings, express=express) if term is not None else None
        if drop is None:
            kept.append(site)
        else:
            dropped.append((site, drop))
    return kept, dropped
