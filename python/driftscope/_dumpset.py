"""Dump sets (docs/dumpsets.md): one .tdump per rank of a distributed run plus a manifest.

    s = driftscope.open_set("run/")          # the directory, or run/driftscope-set.json
    s.world_size, s.groups, s.order          # 2, {"tp": 2}, "lockstep"
    for rank in s.ranks: print(rank.rank, rank.coords, rank.dump.records()[:3])

The manifest is validated and each rank's ds.rank / ds.world_size / ds.coords metadata checked by
the library (the same code as `driftscope verify`); errors raise the documented exceptions.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Mapping, Union

from . import _core
from ._dump import Dump, open as _open


@dataclass(frozen=True)
class Rank:
    rank: int
    file: str              # as in the manifest (relative to the set's directory)
    path: str
    coords: Mapping[str, int]
    dump: Dump


@dataclass(frozen=True)
class DumpSet:
    path: str
    directory: str
    world_size: int
    groups: Dict[str, int]       # in manifest order
    order: str                   # "lockstep" or "pipeline"
    ranks: List[Rank]            # index = rank
    metadata: Dict[str, str]


def open_set(path: Union[str, "os.PathLike[str]"], *, verify: bool = True) -> DumpSet:
    """Opens a dump set; ``verify`` checks every record checksum of every rank's dump."""
    d = _core.open_set(os.fspath(path))
    ranks = [Rank(r, f, p, dict(c), _open(p, verify=verify)) for r, f, p, c in d["ranks"]]
    return DumpSet(d["path"], d["directory"], d["world_size"], dict(d["groups"]), d["order"], ranks,
                   dict(d["metadata"]))
