"""Graph surgery: cut a model into pieces at named tensors (ONNX, .tflite)."""
