"""A planted runtime fault for the ONNX Runtime / OpenVINO generations (issue 31): used by
tests/python/test_llm_runtimes.py and docs/howto/llm.md, on the graph driftscope.llm.export_onnx
writes."""

import numpy as np
import onnx

BLOCK = 8  # the fault scales cache writes at positions >= 8: step 2 after the 7-token prompt


def plant_cache_write_fault(src, dst, layer=1, part="key", from_position=BLOCK, scale=1.5):
    """A runtime bug in one layer's attention: the new key entries written to the cache at
    positions >= from_position are scaled (a paged cache's second block written wrongly). The
    attention of that step reads the cache, so it sees the fault too."""
    from onnx import TensorProto, helper, numpy_helper

    p = onnx.load(str(src))
    concat = next(n for n in p.graph.node if f"present.{layer}.{part}" in n.output)
    scope = f"/model/layers.{layer}/self_attn/cache_write"
    p.graph.initializer.extend([
        numpy_helper.from_array(np.array(from_position, np.int64), "fault_from"),
        numpy_helper.from_array(np.array(scale - 1.0, np.float32), "fault_extra"),
        numpy_helper.from_array(np.array([1, 3], np.int64), "fault_axes")])
    new = concat.input[1]
    nodes = [
        helper.make_node("GreaterOrEqual", ["position_ids", "fault_from"], ["fault_ge"],
                         name=f"{scope}/GreaterOrEqual"),
        helper.make_node("Cast", ["fault_ge"], ["fault_f"], to=TensorProto.FLOAT,
                         name=f"{scope}/Cast"),
        helper.make_node("Mul", ["fault_f", "fault_extra"], ["fault_d"], name=f"{scope}/Mul"),
        helper.make_node("Unsqueeze", ["fault_d", "fault_axes"], ["fault_d4"],
                         name=f"{scope}/Unsqueeze"),
        helper.make_node("Mul", [new, "fault_d4"], ["fault_delta"], name=f"{scope}/Mul_1"),
        helper.make_node("Add", [new, "fault_delta"], ["fault_written"], name=f"{scope}/Add")]
    concat.input[1] = "fault_written"
    at = list(p.graph.node).index(concat)
    for i, n in enumerate(nodes):
        p.graph.node.insert(at + i, n)
    onnx.save(p, str(dst))
