"""The activation of assigned jobs decides on plain values (engine.watch.activation)."""

from __future__ import annotations

from jedictl.engine.brokerage.model import BrokerageCatalog, StorageEndpoint
from jedictl.engine.watch.activation import AwaitedFile, missing_inputs, readable_endpoints
from tests.engine.brokerage.test_job_brokerage import make_site

AWAITED = [AwaitedFile("ds", "f1", "SITE_DATADISK"), AwaitedFile("ds", "f2", "SITE_DATADISK")]


def test_a_job_waits_until_every_awaited_file_is_at_an_endpoint_its_site_reads():
    readable = frozenset({"SITE_DATADISK"})
    assert missing_inputs(AWAITED, {}, readable) == ["f1", "f2"]
    assert missing_inputs(AWAITED, {"ds": {"SITE_DATADISK": {"f1"}}}, readable) == ["f2"]
    assert missing_inputs(AWAITED, {"ds": {"ELSEWHERE": {"f1", "f2"}}}, readable) == ["f1", "f2"]
    assert missing_inputs(AWAITED, {"ds": {"SITE_DATADISK": {"f1", "f2"}}}, readable) == []


def test_readable_endpoints_leave_out_tape_and_blacklisted_disks():
    site = make_site("SITE", read_endpoints=("SITE_DATADISK", "SITE_TAPE", "SITE_BAD"))
    catalog = BrokerageCatalog(sites=(site,), endpoints={"SITE_DATADISK": StorageEndpoint("SITE_DATADISK"),
                                                         "SITE_TAPE": StorageEndpoint("SITE_TAPE", "tape"),
                                                         "SITE_BAD": StorageEndpoint("SITE_BAD", blacklisted_read=True)})
    assert readable_endpoints(site, catalog) == {"SITE_DATADISK"}
    assert readable_endpoints(None, catalog) == frozenset()
