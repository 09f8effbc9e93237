"""Periodic templates the periodic tests share (docs/periodic-tasks.md)."""

from __future__ import annotations

from typing import Any

NOW = "2026-11-27T23:00:00"


def hc_template(site: str = "ANALY_X", **extra: Any) -> dict[str, Any]:
    """A HammerCloud-style functional test: a no-input task of two short jobs, its name and datasets
    carrying the due time."""
    name = f"hc.test.{site}.${{DUE}}"
    return {"name": name, "label": "test", "processing_type": "hammercloud", "transformation": "hc_test.sh",
            "command": "--seed=${RNDMSEED} --out=${OUTPUT0}", "no_input": True,
            "outputs": [{"dataset": f"{name}.out", "file_template": "hc.${JEDITASKID}._${SN/P}.out"}],
            "log": {"dataset": f"{name}.log", "file_template": "hc.${JEDITASKID}._${SN/P}.log.tgz"},
            "split": {"n_events": 10, "n_events_per_job": 5}, **extra}
