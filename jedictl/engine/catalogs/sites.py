"""The resource catalog file (PanDA's schedconfig/CRIC): nuclei, storage endpoints and sites (PanDA
queues), validated into plain records for `jedictl sites import`. Format: docs/sites.md.

Validation is whole-file: every reference (a site's nucleus, its read/write endpoints, an endpoint's
nucleus) must resolve to something in the file or already in the catalog, so an import either applies
completely or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping

from jedictl.engine.input import fields
from jedictl.errors import BadInput
from jedictl.model.choices import BATCH_SYSTEMS, ENDPOINT_KINDS, NUCLEUS_STATUSES, SITE_STATUSES  # noqa: F401 (re-exported)

CONTAINER_RUNTIMES = ("apptainer", "docker")
URL_SCHEMES = ("file",)


def _choice(choices: tuple[str, ...], default: str | None = None) -> Callable[[Any, str], Any]:
    def read(value: Any, path: str) -> Any:
        text = fields.text(value, path) or default
        if text not in choices:
            raise BadInput(f"must be one of {', '.join(choices)}", path)
        return text
    return read


def _count(value: Any, path: str) -> int | None:
    return fields.integer(value, path, minimum=0, maximum=fields.INT32_MAX)  # INTEGER columns


def _positive(value: Any, path: str) -> float | None:
    return fields.number(value, path, minimum=0)


def _names(value: Any, path: str) -> list[str] | None:
    return fields.names(value, path) or None


def _caps(value: Any, path: str) -> dict[str, dict[str, int]] | None:
    """Per job type (prodSourceLabel) caps: {"managed": {"max_running": 100, "max_queued": 50}}."""
    caps = {}
    for label, body in fields.mapping(value, path).items():
        entry = fields.mapping(body, f"{path}.{label}")
        for key in entry:
            if key not in ("max_running", "max_queued"):
                raise BadInput("unknown cap (use max_running, max_queued)", f"{path}.{label}.{key}")
        caps[str(label)] = {key: fields.integer(entry[key], f"{path}.{label}.{key}", minimum=0, maximum=fields.INT32_MAX) for key in entry}
    return caps or None


def _url(value: Any, path: str) -> str | None:
    """A storage endpoint's root: `file:///abs/path` (the only scheme so far); None keeps it catalog-only."""
    url = fields.text(value, path, max_length=1024)
    if url is None:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in URL_SCHEMES:
        raise BadInput(f"must be a URL with scheme {', '.join(s + '://' for s in URL_SCHEMES)} (e.g. file:///srv/data/DATADISK)", path)
    if not rest.startswith("/"):
        raise BadInput("must name an absolute path (file:///srv/data/DATADISK)", path)
    return url.rstrip("/") if rest != "/" else url


def _strings(value: Any, path: str) -> list[str]:
    items = fields.sequence(value, path)
    return [fields.text(item, f"{path}[{i}]", required=True) or "" for i, item in enumerate(items)]


#: `sites[].batch`: where and how `jedictl harvest` submits the site's pilots (docs/executing.md).
BATCH_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "system": _choice(BATCH_SYSTEMS),
    "partition": lambda v, p: fields.text(v, p, max_length=128),
    "account": lambda v, p: fields.text(v, p, max_length=128),
    "qos": lambda v, p: fields.text(v, p, max_length=128),
    "max_pilots": lambda v, p: fields.integer(v, p, minimum=0, maximum=100_000),  # queued + running
    "max_queued": lambda v, p: fields.integer(v, p, minimum=0, maximum=100_000),  # waiting in the batch queue
    "jobs_per_pilot": lambda v, p: fields.integer(v, p, minimum=1, maximum=100_000),
    "slots": lambda v, p: fields.integer(v, p, minimum=1, maximum=1024),  # payloads a pilot runs at once
    "walltime": lambda v, p: fields.integer(v, p, minimum=60, maximum=fields.INT32_MAX),  # s, the batch job's limit
    "cores": lambda v, p: fields.integer(v, p, minimum=1, maximum=1024),
    "memory_mb": lambda v, p: fields.integer(v, p, minimum=1, maximum=fields.INT32_MAX),
    "workdir": lambda v, p: fields.text(v, p, max_length=1024),  # the pilots' scratch (default: the batch job's cwd)
    "submit_args": _strings,  # extra sbatch arguments, as an argument vector
}


def _batch(value: Any, path: str) -> dict[str, Any] | None:
    if value is None:
        return None
    body = fields.mapping(value, path)
    for key in body:
        if key not in BATCH_FIELDS:
            raise BadInput(f"unknown field (use {', '.join(BATCH_FIELDS)})", f"{path}.{key}")
    if body.get("system") is None:
        raise BadInput(f"is required (one of {', '.join(BATCH_SYSTEMS)})", f"{path}.system")
    batch = {key: read(body.get(key), f"{path}.{key}") for key, read in BATCH_FIELDS.items() if body.get(key) is not None}
    return batch


def _flag_default(default: bool) -> Callable[[Any, str], bool]:
    return lambda value, path: default if value is None else fields.flag(value, path)


# Each entity: field -> reader. The readers double as the documentation's field list (docs/sites.md).
NUCLEUS_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "name": lambda v, p: fields.catalog_name(v, p, "a nucleus name", required=True),
    "status": _choice(NUCLEUS_STATUSES, "active"),
    "cloud": lambda v, p: fields.catalog_name(v, p, "a cloud name"),
}
ENDPOINT_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "name": lambda v, p: fields.catalog_name(v, p, "a storage endpoint name", required=True, max_length=128),
    "kind": _choice(ENDPOINT_KINDS, "disk"),
    "nucleus": lambda v, p: fields.catalog_name(v, p, "a nucleus name"),
    "free_gb": lambda v, p: _positive(v, p) or 0.0,
    "total_gb": lambda v, p: _positive(v, p) or 0.0,
    "blacklisted_read": _flag_default(False),
    "blacklisted_write": _flag_default(False),
    "url": _url,
}
SITE_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "name": lambda v, p: fields.catalog_name(v, p, "a site name", required=True),
    "status": _choice(SITE_STATUSES, "online"),
    "cloud": lambda v, p: fields.catalog_name(v, p, "a cloud name"),
    "tier": lambda v, p: fields.integer(v, p, minimum=0, maximum=3),
    "nucleus": lambda v, p: fields.catalog_name(v, p, "a nucleus name"),
    "core_count": lambda v, p: fields.integer(v, p, minimum=-1, maximum=1024),  # 0 or -1: dynamic slots
    "core_power": _positive,
    "min_memory": _count,
    "max_memory": _count,
    "min_walltime": _count,
    "max_walltime": _count,
    "max_scratch_mb": _count,
    "processing_types": _names,
    "excluded_processing_types": _names,
    "releases": _names,
    "containers": _names,
    "max_running": _count,
    "max_queued": _count,
    "job_caps": _caps,
    "pilots_active": _flag_default(True),
    "direct_io": _flag_default(False),
    "cvmfs": _flag_default(False),  # its worker nodes mount /cvmfs (PanDA's is_cvmfs)
    "transferring_limit": _count,
    "batch": _batch,
    "container_runtime": lambda v, p: None if v is None else _choice(CONTAINER_RUNTIMES)(v, p),
}
SITE_STORAGE_KEYS = ("read_endpoints", "write_endpoints")


@dataclass(frozen=True)
class ResourceCatalog:
    nuclei: list[dict[str, Any]]
    endpoints: list[dict[str, Any]]
    sites: list[dict[str, Any]]
    site_storage: list[tuple[str, str, str]]  # (site, endpoint, read|write)


def parse_resource_catalog(
    document: Mapping[str, Any],
    known_nuclei: Collection[str] = (),
    known_endpoints: Collection[str] = (),
) -> ResourceCatalog:
    """Validate a sites file; `known_*` are names already in the catalog that references may use."""
    for key in document:
        if key not in ("nuclei", "storage_endpoints", "sites"):
            raise BadInput("unknown section (use nuclei, storage_endpoints, sites)", str(key))
    nuclei = _entities(document.get("nuclei"), "nuclei", NUCLEUS_FIELDS)
    endpoints = _entities(document.get("storage_endpoints"), "storage_endpoints", ENDPOINT_FIELDS)
    nucleus_names = set(known_nuclei) | {n["name"] for n in nuclei}
    endpoint_names = set(known_endpoints) | {e["name"] for e in endpoints}
    for index, endpoint in enumerate(endpoints):
        if endpoint["nucleus"] and endpoint["nucleus"] not in nucleus_names:
            raise BadInput(f"unknown nucleus {endpoint['nucleus']!r}", f"storage_endpoints[{index}].nucleus")
    sites, storage = [], []
    site_names: set[str] = set()
    for index, raw in enumerate(fields.sequence(document.get("sites"), "sites")):
        path = f"sites[{index}]"
        body = fields.mapping(raw, path)
        site = _entity(body, path, SITE_FIELDS, extra=SITE_STORAGE_KEYS)
        if site["name"] in site_names:  # as for nuclei and endpoints (_entities)
            raise BadInput(f"{site['name']!r} is listed twice", f"{path}.name")
        site_names.add(site["name"])
        if site["nucleus"] and site["nucleus"] not in nucleus_names:
            raise BadInput(f"unknown nucleus {site['nucleus']!r}", f"{path}.nucleus")
        for low, high in (("min_memory", "max_memory"), ("min_walltime", "max_walltime")):
            if site[low] is not None and site[high] is not None and site[low] > site[high]:
                raise BadInput(f"is larger than {high}", f"{path}.{low}")
        for role in ("read", "write"):
            for position, endpoint in enumerate(fields.names(body.get(f"{role}_endpoints"), f"{path}.{role}_endpoints")):
                if endpoint not in endpoint_names:
                    raise BadInput(f"unknown storage endpoint {endpoint!r}", f"{path}.{role}_endpoints[{position}]")
                storage.append((site["name"], endpoint, role))
        sites.append(site)
    return ResourceCatalog(nuclei=nuclei, endpoints=endpoints, sites=sites, site_storage=storage)


def _entities(raw: Any, section: str, spec: Mapping[str, Callable[[Any, str], Any]]) -> list[dict[str, Any]]:
    result = []
    seen: set[str] = set()
    for index, item in enumerate(fields.sequence(raw, section)):
        path = f"{section}[{index}]"
        entity = _entity(fields.mapping(item, path), path, spec)
        if entity["name"] in seen:
            raise BadInput(f"{entity['name']!r} is listed twice", f"{path}.name")
        seen.add(entity["name"])
        result.append(entity)
    return result


def _entity(body: Mapping[str, Any], path: str, spec: Mapping[str, Callable[[Any, str], Any]], extra: tuple[str, ...] = ()) -> dict[str, Any]:
    for key in body:
        if key not in spec and key not in extra and key != "attributes":
            raise BadInput("unknown field", f"{path}.{key}")
    entity = {key: read(body.get(key), f"{path}.{key}") for key, read in spec.items()}
    entity["attributes"] = fields.free_form(body.get("attributes"), f"{path}.attributes")
    return entity
