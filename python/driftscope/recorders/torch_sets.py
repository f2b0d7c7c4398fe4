"""The multi-rank side of ``driftscope.torch.record``: where each rank's dump goes, its rank
metadata, shard annotations and the manifest (docs/dumpsets.md, docs/howto/pytorch.md
"Multi-rank runs"). Kept apart from the recorder so that recording speed work and this do not
touch the same code."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _core
from ..errors import InvalidArgumentError
from ..sets import Layout, ShardSpec, annotate_axes, write_manifest


def _bad(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, 1, "invalid_argument")


def _dist() -> Any:
    """torch.distributed when a process group is initialised, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - every torch build has it
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


class SetRecording:
    """One rank's part of a dump set: ``path`` is the set directory."""

    def __init__(self, directory: str, layout: Layout,
                 shards: Sequence[Tuple[str, ShardSpec]], dist: Any) -> None:
        self.directory = directory
        self.layout = layout
        self.shards = list(shards)
        self.file = layout.file_in(directory)
        self._dist = dist

    @staticmethod
    def resolve(path: str, *, distributed: Optional[bool], groups: Optional[Mapping[str, int]],
                coords: Optional[Mapping[str, int]], rank: Optional[int],
                world_size: Optional[int], shards: Optional[Mapping[str, str]],
                order: Optional[str]) -> Optional["SetRecording"]:
        """None for a plain single-file recording; else the set this rank records into.
        A set when ``distributed`` is True, or (None) when a torch.distributed process group
        is initialised or a layout (groups, coords, rank, world_size) is given."""
        dist = _dist()
        explicit = any(v is not None for v in (groups, coords, rank, world_size))
        if distributed is None:
            distributed = dist is not None or explicit
        if not distributed:
            if explicit or shards:
                raise _bad("groups/coords/rank/world_size/shards describe a dump set; they "
                           "cannot be used with distributed=False")
            return None
        if dist is not None:
            pg_rank, pg_world = dist.get_rank(), dist.get_world_size()
            if rank is not None and rank != pg_rank:
                raise _bad(f"rank={rank} but torch.distributed says this is rank {pg_rank}")
            if world_size is not None and world_size != pg_world:
                raise _bad(f"world_size={world_size} but torch.distributed's world is "
                           f"{pg_world}")
            rank, world_size = pg_rank, pg_world
        elif rank is None or world_size is None:
            raise _bad("a dump set without torch.distributed needs rank= and world_size= "
                       "(no process group is initialised)")
        if dist is None and coords is not None and world_size > 1:
            raise _bad("coords= without torch.distributed: rank 0 cannot learn the other "
                       "ranks' coordinates; give groups= (row-major coordinates) or write the "
                       "manifest with driftscope.sets.write_manifest(coords=[...])")
        layout = Layout.from_groups(rank, world_size, groups, coords, order)
        parsed = []
        for pattern, text in (shards or {}).items():
            _core.glob_match(str(pattern), "")  # a bad glob fails here, before any file
            parsed.append((str(pattern), ShardSpec.parse(text, layout.groups)))
        if os.path.exists(path) and not os.path.isdir(path):
            raise _bad(f"{path}: a dump set is a directory, and this is a file")
        os.makedirs(path, exist_ok=True)
        return SetRecording(path, layout, parsed, dist)

    def axes(self, name: str, axes: Optional[List[str]], rank: int) -> Optional[List[str]]:
        """The record's axis names with the first matching ``shards`` pattern's annotation."""
        for pattern, spec in self.shards:
            if _core.glob_match(pattern, name):
                try:
                    return annotate_axes(axes, rank, spec)
                except InvalidArgumentError as e:
                    raise _bad(f"shards[{pattern!r}] on {name!r}: {e}") from None
        return axes

    def finish(self, metadata: Mapping[str, str], completed: bool) -> None:
        """After this rank's file is closed: wait for every rank (torch.distributed barrier),
        then rank 0 writes the manifest. Not when the recording ended in an exception: a set
        without its manifest is visibly incomplete."""
        if not completed:
            return
        coords = None
        if self._dist is not None:
            # A collective: it returns once every rank has closed its file, and tells rank 0
            # the coordinates of ranks that gave explicit coords=.
            gathered: List[Any] = [None] * self.layout.world_size
            self._dist.all_gather_object(gathered, self.layout.coords)
            coords = gathered
        if self.layout.rank == 0:
            keep = {k: metadata[k] for k in ("model", "framework", "writer", "start_time")
                    if k in metadata}
            write_manifest(self.directory, world_size=self.layout.world_size,
                           groups=self.layout.groups, order=self.layout.order, metadata=keep,
                           coords=coords)
