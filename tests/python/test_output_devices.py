"""Reports written to a character device or a FIFO are written in place (include/driftscope/
file.hpp's output rules), from the Python commands too: before, `python -m driftscope compare
--plot /dev/null` wrote a temporary file and renamed it over /dev/null, which as root replaced
the device with a regular file."""

from __future__ import annotations

import os
import stat

import pytest

from driftscope._cli import write_output


@pytest.mark.parametrize("data", ["a text report\n", b"\x89PNG bytes"])
def test_a_character_device_stays_a_device(tmp_path, data):
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a node of the null device
    except (PermissionError, OSError) as err:
        pytest.skip(f"cannot make a device node here ({err}): needs root")
    write_output(str(dev), data)
    assert stat.S_ISCHR(os.stat(dev).st_mode)
    assert os.listdir(tmp_path) == ["null"]  # no temporary file left beside it


@pytest.mark.parametrize("data", ["text\n", b"bytes"])
def test_a_regular_file_is_replaced_whole(tmp_path, data):
    out = tmp_path / "report"
    out.write_text("old contents that are longer than the new ones")
    write_output(str(out), data)
    want = data if isinstance(data, bytes) else data.encode()
    assert out.read_bytes() == want and os.listdir(tmp_path) == ["report"]
