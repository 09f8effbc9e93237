"""Pure parts of the pilot's staging."""

from __future__ import annotations

from jedictl.engine.pilot.staging import with_destinations


def test_outputs_without_a_destination_go_to_the_sites_write_endpoint():
    payload = {"job_id": 1, "outputs": [{"lfn": "a", "destination": None}, {"lfn": "b", "destination": "NUCLEUS_DISK"}]}
    moved = with_destinations(payload, "SITE_DISK")
    assert [o["destination"] for o in moved["outputs"]] == ["SITE_DISK", "NUCLEUS_DISK"]
    assert payload["outputs"][0]["destination"] is None  # the dispatch answer itself is not changed
    assert with_destinations(payload, None) is payload  # a site without a write endpoint: the pilot fails it (1137)
