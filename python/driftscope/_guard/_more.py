"""The backends that live in their own modules, in the order ``--list-backends`` shows them."""

from __future__ import annotations

from typing import List, Sequence

from ._backends import Backend


def backends(onnx_backends: Sequence[Backend]) -> List[Backend]:
    from ._openvino import BACKENDS as OPENVINO
    from ._ortqdq import OrtQdqBackend
    from ._torch_extra import TorchCompileBackend, exported_backends

    from ._iree import IreeBackend

    onnx: List[Backend] = [OrtQdqBackend(), *OPENVINO, IreeBackend()]
    torch: List[Backend] = [TorchCompileBackend()]
    from ._executorch import ExecuTorchBackend

    torch.append(ExecuTorchBackend())
    torch += exported_backends(list(onnx_backends) + onnx)
    return onnx + torch
