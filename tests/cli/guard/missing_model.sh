# A model path that does not exist: one line naming it, exit 2, no Python traceback.
driftscope guard no_such_model.onnx
