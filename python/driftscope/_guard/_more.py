"""The backends that live in their own modules, in the order ``--list-backends`` shows them."""

from __future__ import annotations

from typing import List, Sequence

from ._backends import Backend


def backends(onnx_backends: Sequence[Backend]) -> List[Backend]:
    from ._openvino import BACKENDS as OPENVINO
    from ._ortqdq import OrtQdqBackend
    from ._torch_extra import NotInstalledBackend, TorchCompileBackend, exported_backends

    from ._iree import IreeBackend

    onnx: List[Backend] = [OrtQdqBackend(), *OPENVINO, IreeBackend()]
    torch: List[Backend] = [TorchCompileBackend()]
    torch.append(NotInstalledBackend(
        "executorch", "torch", "ExecuTorch, XNNPACK delegate (torch.export, to_edge, .pte)",
        "executorch", "executorch",
        "this version of driftscope guard has no ExecuTorch runner"))
    torch += exported_backends(list(onnx_backends) + onnx)
    return onnx + torch
