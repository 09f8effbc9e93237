"""Resource types (SCORE, MCORE, SCORE_HIMEM, MCORE_HIMEM): the second scheduling dimension.

A task (or job) matches the first type whose core and RAM-per-core bounds contain it
(jedi-inventory.md §3.5). Core count 0 ("any") counts as 8; RAM per core includes the base RAM and
JEDI's 0.9 memory compensation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from jedictl.engine.input import fields
from jedictl.errors import BadInput

ANY_CORES = 8


@dataclass(frozen=True)
class ResourceTypeDef:
    name: str
    min_core: int | None
    max_core: int | None
    min_ram_per_core: float | None
    max_ram_per_core: float | None

    def contains(self, cores: int, ram_per_core: float) -> bool:
        return (
            (self.min_core is None or cores >= self.min_core)
            and (self.max_core is None or cores <= self.max_core)
            and (self.min_ram_per_core is None or ram_per_core >= self.min_ram_per_core)
            and (self.max_ram_per_core is None or ram_per_core <= self.max_ram_per_core)
        )


def load_resource_types(definitions: Sequence[Mapping[str, Any]], path: str = "resource_types") -> list[ResourceTypeDef]:
    types = []
    for index, raw in enumerate(definitions):
        where = f"{path}[{index}]"
        body = fields.mapping(raw, where)
        types.append(ResourceTypeDef(
            name=fields.text(body.get("name"), f"{where}.name", required=True, max_length=32) or "",
            min_core=fields.integer(body.get("min_core"), f"{where}.min_core", minimum=0),
            max_core=fields.integer(body.get("max_core"), f"{where}.max_core", minimum=0),
            min_ram_per_core=fields.number(body.get("min_ram_per_core"), f"{where}.min_ram_per_core", minimum=0),
            max_ram_per_core=fields.number(body.get("max_ram_per_core"), f"{where}.max_ram_per_core", minimum=0),
        ))
    if not types:
        raise BadInput("at least one resource type is required", path)
    return types


def ram_per_core(ram_count: int | None, ram_unit: str | None, base_ram: int | None, cores: int, compensation: float) -> float:
    """MB per core as JEDI compares it: per-core units add the base once, then the 0.9 compensation."""
    cores = cores or ANY_CORES
    ram = ram_count or 0
    base = base_ram or 0
    if ram_unit and ram_unit.startswith("MBPerCore"):
        per_core = (ram * cores + base) / cores
    else:
        per_core = (ram + base) / cores
    return math.floor(per_core * compensation)


def match_resource_type(types: Sequence[ResourceTypeDef], cores: int, ram_per_core_mb: float) -> str | None:
    cores = cores or ANY_CORES
    return next((t.name for t in types if t.contains(cores, ram_per_core_mb)), None)
