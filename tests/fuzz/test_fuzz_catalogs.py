"""Fuzzing the catalog files: `sites import`, `data import` and `data add-files`, valid and broken."""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ROOT
from tests.fuzz.strategies import NAME_ALPHABET, broken_documents, free_text, names, serialise, storable_values
from tests.fuzz.support import assert_no_crash, assert_one_error_line, changed_tables, dump, fuzz, invoke

SITES_EXAMPLE = yaml.safe_load((ROOT / "examples" / "sites.yaml").read_text())
DATA_EXAMPLE = yaml.safe_load((ROOT / "examples" / "data.yaml").read_text())
KNOWN_NUCLEI = [n["name"] for n in SITES_EXAMPLE["nuclei"]]
KNOWN_ENDPOINTS = [e["name"] for e in SITES_EXAMPLE["storage_endpoints"]]
SITE_TABLES = {"nuclei", "storage_endpoints", "sites", "site_storage"}
DATA_TABLES = {"catalog_datasets", "catalog_container_members", "catalog_files", "catalog_replicas", "catalog_file_replicas"}
OPEN_DATASET = "data24_13p6TeV.periodAllYear.physics_Main.PhysCont.DAOD_PHYS.grp24_v01_p6266"
CLOSED_DATASET = "ds.in"

count = st.none() | st.integers(0, 2**31 - 1)
#: What a nucleus, endpoint, site or cloud may be called (fields.CATALOG_NAME_RE); anything else is refused.
site_names = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")


@st.composite
def resource_catalogs(draw: st.DrawFn) -> dict:
    """A valid sites file: every reference resolves to the file or to the seeded catalog."""
    nuclei = [{"name": name, "status": draw(st.sampled_from(["active", "inactive"])), "cloud": draw(st.none() | site_names)}
              for name in draw(st.lists(site_names, max_size=2, unique=True))]
    nucleus_names = KNOWN_NUCLEI + [n["name"] for n in nuclei]
    endpoints = [{"name": name, "kind": draw(st.sampled_from(["disk", "tape"])), "nucleus": draw(st.none() | st.sampled_from(nucleus_names)),
                  "free_gb": draw(st.floats(0, 1e9)), "total_gb": draw(st.floats(0, 1e9)), "blacklisted_write": draw(st.booleans())}
                 for name in draw(st.lists(site_names, max_size=3, unique=True))]
    endpoint_names = KNOWN_ENDPOINTS + [e["name"] for e in endpoints]
    sites = []
    for name in draw(st.lists(site_names, max_size=3, unique=True)):
        low, high = sorted(draw(st.lists(st.integers(0, 2**31 - 1), min_size=2, max_size=2)))
        site = {"name": name, "status": draw(st.sampled_from(["online", "brokeroff", "offline", "test"])),
                "tier": draw(st.none() | st.integers(0, 3)), "nucleus": draw(st.none() | st.sampled_from(nucleus_names)),
                "core_count": draw(st.integers(-1, 1024)), "core_power": draw(st.none() | st.floats(0, 1000)),
                "min_memory": low, "max_memory": high, "max_walltime": draw(count), "max_scratch_mb": draw(count),
                "read_endpoints": draw(st.lists(st.sampled_from(endpoint_names), max_size=2, unique=True)),
                "write_endpoints": draw(st.lists(st.sampled_from(endpoint_names), max_size=1)),
                "releases": draw(st.none() | st.lists(names, max_size=2)), "max_running": draw(count),
                "job_caps": draw(st.none() | st.dictionaries(st.sampled_from(["managed", "user"]), st.fixed_dictionaries({"max_running": st.integers(0, 10**6)}), max_size=2)),
                "pilots_active": draw(st.booleans()), "attributes": draw(st.dictionaries(names, storable_values, max_size=2))}
        sites.append({key: value for key, value in site.items() if value is not None})
    return {"nuclei": nuclei, "storage_endpoints": endpoints, "sites": sites}


lfns = st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=60)


@st.composite
def catalog_files(draw: st.DrawFn, max_size: int = 5) -> list[dict]:
    return [{key: value for key, value in {
        "lfn": lfn, "size": draw(st.none() | st.integers(0, 2**62)), "events": draw(st.none() | st.integers(0, 10**9)),
        "guid": draw(st.none() | free_text(36)), "checksum": draw(st.none() | st.sampled_from(["ad:0a1b2c3d", "md5:00ff", "x'; --"])),
        "run": draw(st.none() | st.integers(0, 10**9)), "lumi_blocks": draw(st.none() | st.lists(st.integers(0, 10**6), max_size=3)),
    }.items() if value is not None} for lfn in draw(st.lists(lfns, max_size=max_size, unique=True))]


@st.composite
def data_catalogs(draw: st.DrawFn) -> dict:
    """A valid data-catalog file: datasets with files and replicas at known endpoints, containers of them."""
    datasets = []
    for name in draw(st.lists(names.map(lambda n: "fz." + n), max_size=3, unique=True)):
        files = draw(catalog_files())
        replicas = [{"endpoint": draw(st.sampled_from(KNOWN_ENDPOINTS))}]
        if files and draw(st.booleans()):
            replicas.append({"endpoint": draw(st.sampled_from(KNOWN_ENDPOINTS)), "complete": False, "files": [files[0]["lfn"]]})
        datasets.append({"name": name, "state": draw(st.sampled_from(["open", "closed"])), "files": files, "replicas": replicas,
                         "attributes": draw(st.dictionaries(names, storable_values, max_size=2))})
    members = [d["name"] for d in datasets] + [CLOSED_DATASET]
    containers = [{"name": "fzc." + name, "datasets": draw(st.lists(st.sampled_from(members), min_size=1, max_size=3))}
                  for name in draw(st.lists(names, max_size=1))]
    return {"datasets": datasets, "containers": containers}


def _import(stores, argv: list[str], text: str, allowed: set[str]) -> None:
    url = stores.fresh()
    try:
        outcome = invoke([*argv, "--db", url], input=text)
        assert_no_crash(outcome, codes=(0, 2))
        changed = changed_tables(stores.template_dump, dump(url))
        if outcome.exit_code == 2:
            assert_one_error_line(outcome)
            assert changed == [], f"refused, but {changed} changed\n{outcome}"
        else:
            assert set(changed) <= allowed, outcome
    finally:
        stores.discard(url)


@fuzz(20)
@given(data=st.data())
def test_valid_sites_files_are_imported(stores, data):
    url = stores.fresh()
    try:
        outcome = invoke(["sites", "import", "-", "--db", url], input=serialise(data.draw, data.draw(resource_catalogs())))
        assert_no_crash(outcome, codes=(0,))
        assert set(changed_tables(stores.template_dump, dump(url))) <= SITE_TABLES
        # Brokerage reads what was imported: a pass over the seeded tasks must not crash on it.
        assert_no_crash(invoke(["run", "--seed", "1", "--db", url]), codes=(0, 1))
    finally:
        stores.discard(url)


@fuzz(60)
@given(text=broken_documents(st.just(SITES_EXAMPLE) | resource_catalogs()))
def test_broken_sites_files_are_refused_cleanly(stores, text):
    _import(stores, ["sites", "import", "-"], text, SITE_TABLES)


@fuzz(20)
@given(data=st.data())
def test_valid_data_catalogs_are_imported(stores, data):
    url = stores.fresh()
    try:
        outcome = invoke(["data", "import", "-", "--db", url], input=serialise(data.draw, data.draw(data_catalogs())))
        assert_no_crash(outcome, codes=(0,))
        assert set(changed_tables(stores.template_dump, dump(url))) <= DATA_TABLES
    finally:
        stores.discard(url)


@fuzz(60)
@given(text=broken_documents(st.just(DATA_EXAMPLE) | data_catalogs()))
def test_broken_data_catalogs_are_refused_cleanly(stores, text):
    _import(stores, ["data", "import", "-"], text, DATA_TABLES)


@fuzz(40)
@given(dataset=st.sampled_from([OPEN_DATASET, CLOSED_DATASET, "no.such.dataset"]) | free_text(80),
       text=broken_documents(catalog_files(max_size=3).map(lambda files: {"files": files})))
def test_add_files_never_crashes(stores, dataset, text):
    _import(stores, ["data", "add-files", dataset, "-"], text, DATA_TABLES)


@fuzz(15)
@given(files=catalog_files(max_size=4).filter(bool), data=st.data())
def test_add_files_to_an_open_dataset(stores, files, data):
    url = stores.fresh()
    try:
        outcome = invoke(["data", "add-files", OPEN_DATASET, "-", "--db", url], input=serialise(data.draw, {"files": files}))
        assert_no_crash(outcome, codes=(0,))
        assert set(changed_tables(stores.template_dump, dump(url))) <= DATA_TABLES
    finally:
        stores.discard(url)
