"""Dump sets: one ``.tdump`` per rank plus a manifest (docs/dumpsets.md), written by any framework.

    from driftscope import sets
    layout = sets.Layout.from_groups(rank=1, world_size=2, groups={"tp": 2})
    with driftscope.Writer(layout.file_in("run"), meta=layout.run_metadata()) as w:
        w.write("mlp.fc1", shard, axes="batch,seq,hidden@tp")
    sets.write_manifest("run", world_size=2, groups={"tp": 2})   # rank 0, after every rank wrote

``driftscope.torch.record`` does all of this under ``torch.distributed`` (docs/howto/pytorch.md,
"Multi-rank runs"). :func:`read_manifest` checks a manifest against the contract and returns it.
:func:`annotate_axes` applies a shard annotation (``hidden@tp``, ``+tp``) to a record's axes.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import DumpIOError, InvalidArgumentError

__all__ = ["FORMAT", "MANIFEST", "Layout", "rank_file", "coords_of", "format_coords",
           "write_manifest", "read_manifest", "ShardSpec", "annotate_axes"]

FORMAT = "driftscope.set/1"
MANIFEST = "driftscope-set.json"
ORDERS = ("lockstep", "pipeline")
MAX_MANIFEST_BYTES = 16 << 20
_GROUP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}\Z")
_ANNOTATION_GROUP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_WORLD = 4096  # the readers' limit (docs/dumpsets.md, include/driftscope/dumpset.hpp)

PathLike = Union[str, "os.PathLike[str]"]


def _bad(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, 1, "invalid_argument")


def rank_file(rank: int) -> str:
    """The file name of a rank's dump inside a set: ``rank-00003.tdump``."""
    return f"rank-{rank:05d}.tdump"


def _check_groups(groups: Optional[Mapping[str, int]], world_size: int) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for name, size in (groups or {}).items():
        if not isinstance(name, str) or not _GROUP_RE.match(name):
            raise _bad(f"group name {name!r} does not match [A-Za-z_][A-Za-z0-9_]{{0,31}}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise _bad(f"group {name!r}: size {size!r} is not a positive integer")
        out[name] = size
    if len(out) > 16:  # the readers' limit (src/format/dumpset.cpp)
        raise _bad(f"{len(out)} groups, allowed at most 16")
    product = math.prod(out.values()) if out else 1
    if product != world_size:
        raise _bad(f"groups {out} multiply to {product}, not the world size {world_size}")
    return out


def coords_of(rank: int, groups: Mapping[str, int]) -> Dict[str, int]:
    """A rank's coordinates in row-major order of ``groups``: the last group varies fastest
    (``{"pp": 2, "tp": 2}``: rank 3 is pp=1, tp=1; rank 1 is pp=0, tp=1)."""
    out: Dict[str, int] = {}
    rest = rank
    for name, size in reversed(list(groups.items())):
        out[name] = rest % size
        rest //= size
    return {name: out[name] for name in groups}


def format_coords(coords: Mapping[str, int], groups: Mapping[str, int]) -> str:
    """``ds.coords``: ``tp=1,pp=0`` in the groups' order (empty for a world of 1)."""
    return ",".join(f"{g}={coords[g]}" for g in groups)


@dataclass(frozen=True)
class Layout:
    """One rank's place in a parallel layout: rank, world size, groups and its coordinates."""

    rank: int
    world_size: int
    groups: Dict[str, int] = field(default_factory=dict)
    coords: Dict[str, int] = field(default_factory=dict)
    order: str = "lockstep"

    @staticmethod
    def from_groups(rank: int, world_size: int, groups: Optional[Mapping[str, int]] = None,
                    coords: Optional[Mapping[str, int]] = None,
                    order: Optional[str] = None) -> "Layout":
        """Checks every value; ``groups`` defaults to ``{"dp": world_size}`` (a world of 1:
        ``{}``), ``coords`` to :func:`coords_of`, ``order`` to ``pipeline`` when a ``pp``
        group of more than one stage exists, else ``lockstep``."""
        for what, v in (("rank", rank), ("world_size", world_size)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise _bad(f"{what} {v!r} is not an integer")
        if not 1 <= world_size <= _MAX_WORLD:
            raise _bad(f"world_size {world_size} is not in 1 .. {_MAX_WORLD}")
        if not 0 <= rank < world_size:
            raise _bad(f"rank {rank} is not in 0 .. {world_size - 1}")
        if groups is None:
            groups = {"dp": world_size} if world_size > 1 else {}
        g = _check_groups(groups, world_size)
        if coords is None:
            c = coords_of(rank, g)
        else:
            if set(coords) != set(g):
                raise _bad(f"coords {dict(coords)} must give exactly the groups {list(g)}")
            c = {}
            for name in g:
                v = coords[name]
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < g[name]:
                    raise _bad(f"coords: {name}={v!r} is not in 0 .. {g[name] - 1}")
                c[name] = v
        if order is None:
            order = "pipeline" if g.get("pp", 1) > 1 else "lockstep"
        if order not in ORDERS:
            raise _bad(f"order {order!r} is not one of {', '.join(ORDERS)}")
        if order == "pipeline" and "pp" not in g:
            raise _bad("order 'pipeline' needs a 'pp' group (the stage is the pp coordinate)")
        return Layout(rank, world_size, g, c, order)

    def run_metadata(self) -> Dict[str, str]:
        """The run metadata every rank's dump carries: ds.rank, ds.world_size, ds.coords."""
        return {"ds.rank": str(self.rank), "ds.world_size": str(self.world_size),
                "ds.coords": format_coords(self.coords, self.groups)}

    def file_in(self, directory: PathLike) -> str:
        """This rank's file in the set directory ``directory``, which is created if missing
        (every rank may call it; the first one creates it)."""
        os.makedirs(os.fspath(directory), exist_ok=True)
        return os.path.join(os.fspath(directory), rank_file(self.rank))


def write_manifest(directory: PathLike, *, world_size: int,
                   groups: Optional[Mapping[str, int]] = None,
                   coords: Optional[Sequence[Mapping[str, int]]] = None,
                   files: Optional[Sequence[str]] = None, order: Optional[str] = None,
                   metadata: Optional[Mapping[str, Any]] = None) -> str:
    """Writes ``directory/driftscope-set.json`` atomically (a temporary file renamed over it)
    and returns its path. ``coords[r]`` defaults to :func:`coords_of` (r, groups), ``files[r]``
    to :func:`rank_file` (r); ``groups`` and ``order`` as :meth:`Layout.from_groups`. The rank
    files need not exist yet; a reader names any that is missing."""
    directory = os.fspath(directory)
    layouts = []
    for r in range(world_size if isinstance(world_size, int) and world_size >= 1 else 1):
        layouts.append(Layout.from_groups(r, world_size, groups,
                                          coords[r] if coords is not None else None, order))
    if coords is not None and len(coords) != world_size:
        raise _bad(f"coords has {len(coords)} entries for a world of {world_size}")
    if files is not None and len(files) != world_size:
        raise _bad(f"files has {len(files)} entries for a world of {world_size}")
    seen: Dict[Tuple[int, ...], int] = {}
    for lay in layouts:
        key = tuple(lay.coords.values())
        if key in seen:
            raise _bad(f"ranks {seen[key]} and {lay.rank} have the same coordinates "
                       f"{format_coords(lay.coords, lay.groups)}")
        seen[key] = lay.rank
    names = list(files) if files is not None else [rank_file(r) for r in range(world_size)]
    for name in names:
        _check_file_name(name)
    first = layouts[0]
    manifest = {
        "format": FORMAT,
        "world_size": world_size,
        "groups": first.groups,
        "order": first.order,
        "ranks": [{"rank": lay.rank, "file": names[lay.rank], "coords": lay.coords}
                  for lay in layouts],
        "metadata": {str(k): str(v) for k, v in (metadata or {}).items()},
    }
    text = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise _bad(f"the manifest would be over {MAX_MANIFEST_BYTES} bytes")
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, MANIFEST)
    fd, tmp = tempfile.mkstemp(prefix=".driftscope-set.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise DumpIOError(f"{target}: {e.strerror or e}", 2, "io_error") from None
    return target


def _check_file_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise _bad(f"rank file {name!r} is not a non-empty string")
    if "\0" in name or os.path.isabs(name) or name.startswith(("/", "\\")):
        raise _bad(f"rank file {name!r} must be a relative path without NUL")
    if any(part == ".." for part in re.split(r"[/\\]", name)):
        raise _bad(f"rank file {name!r} must not have a '..' component")


def read_manifest(path: PathLike) -> Dict[str, Any]:
    """Reads and checks a set (``path``: the set directory or its manifest) with the library's
    one validator of docs/dumpsets.md, the one ``driftscope verify`` and compare use: manifest,
    rank files and their ds.rank / ds.world_size / ds.coords metadata. Returns the manifest's
    content with ``directory`` and, per rank, ``path`` (the file's full path) added, ranks in
    order. FormatError (or DumpIOError) names what is wrong, e.g. a missing rank file."""
    from . import _core

    d = _core.open_set(os.fspath(path))
    groups = dict(d["groups"])
    return {
        "format": FORMAT, "world_size": d["world_size"], "groups": groups, "order": d["order"],
        "ranks": [{"rank": r, "file": f, "path": p, "coords": {g: dict(c)[g] for g in groups}}
                  for r, f, p, c in sorted(d["ranks"])],
        "metadata": dict(d["metadata"]), "directory": d["directory"],
    }


# -- shard annotations (docs/dumpsets.md "Shard annotations") -----------------------------------

@dataclass(frozen=True)
class ShardSpec:
    """A parsed ``shards=`` value: either a whole axis list (``batch,seq,hidden@tp``) or
    annotation items (``hidden@tp``, ``2@tp``, ``+tp``, comma-separated)."""

    text: str
    full: Optional[Tuple[str, ...]]            # a whole axis list
    splits: Tuple[Tuple[str, str], ...]        # (axis name or index, group)
    partial: Tuple[str, ...]                   # groups summed over

    @staticmethod
    def parse(text: str, groups: Optional[Mapping[str, int]] = None) -> "ShardSpec":
        if not isinstance(text, str) or not text.strip():
            raise _bad(f"shard annotation {text!r} is empty")
        parts = [p.strip() for p in text.split(",")]
        items = all(("@" in p) or p.startswith("+") for p in parts)
        full: Optional[Tuple[str, ...]] = None
        splits: List[Tuple[str, str]] = []
        partial: List[str] = []

        def group(g: str) -> str:
            if not _ANNOTATION_GROUP_RE.match(g):
                raise _bad(f"shard annotation {text!r}: {g!r} is not a group name")
            if groups is not None and g not in groups:
                raise _bad(f"shard annotation {text!r}: group {g!r} is not in the layout "
                           f"{dict(groups)}")
            return g

        if not items:
            full = tuple(parts)
            for p in parts:
                base, *annotations = re.split(r"(?=[@+])", p)
                if not base:
                    raise _bad(f"shard annotation {text!r}: an axis has no name")
                for a in annotations:
                    (splits.append((base, group(a[1:]))) if a[0] == "@"
                     else partial.append(group(a[1:])))
        else:
            for p in parts:
                if p.startswith("+"):
                    partial.append(group(p[1:]))
                    continue
                axis, _, g = p.partition("@")
                if not axis or "+" in axis or "@" in g:
                    raise _bad(f"shard annotation {text!r}: {p!r} is not AXIS@GROUP or +GROUP")
                splits.append((axis, group(g)))
        split_groups = [g for _, g in splits]
        if len(set(split_groups)) != len(split_groups):
            raise _bad(f"shard annotation {text!r}: a group splits at most one axis")
        axes_split = [a for a, _ in splits]
        if len(set(axes_split)) != len(axes_split):
            raise _bad(f"shard annotation {text!r}: at most one split annotation per axis")
        if set(split_groups) & set(partial):
            raise _bad(f"shard annotation {text!r}: a group is not both split and partial")
        return ShardSpec(text, full, tuple(splits), tuple(dict.fromkeys(partial)))


def annotate_axes(axes: Optional[Sequence[str]], rank: int, spec: ShardSpec) -> List[str]:
    """The record's axis names with ``spec``'s annotations. A whole axis list replaces them
    (its length must be the record's rank). Items: ``NAME@G`` annotates the axis named NAME;
    on a record without axis names, unnamed axes are ``dim0``..., and a NAME that is not
    ``dimK`` names the last axis (a column-parallel Linear's output is split on its last
    axis); ``K@G`` (an integer, negative from the last) annotates axis K; ``+G`` goes on the
    last axis. Raises InvalidArgumentError when the spec cannot apply."""
    if spec.full is not None:
        if len(spec.full) != rank:
            raise _bad(f"shard annotation {spec.text!r} has {len(spec.full)} axes for a "
                       f"tensor of rank {rank}")
        return list(spec.full)
    if rank == 0:
        raise _bad(f"shard annotation {spec.text!r} cannot apply to a scalar")
    named = axes is not None
    out = list(axes) if named else [f"dim{i}" for i in range(rank)]
    bases = [re.split(r"[@+]", a, maxsplit=1)[0] for a in out]
    for axis, g in spec.splits:
        if re.fullmatch(r"-?[0-9]+", axis):
            k = int(axis)
            if not -rank <= k < rank:
                raise _bad(f"shard annotation {spec.text!r}: axis {k} of a rank-{rank} tensor")
            k %= rank
        elif axis in bases:
            k = bases.index(axis)
        elif not named:
            k = rank - 1
            out[k] = bases[k] = axis
        else:
            raise _bad(f"shard annotation {spec.text!r}: no axis named {axis!r} in "
                       f"{','.join(out)}")
        if "@" in out[k]:
            raise _bad(f"shard annotation {spec.text!r}: axis {out[k]!r} is already split")
        out[k] += f"@{g}"
    for g in spec.partial:
        out[-1] += f"+{g}"
    return out
