# Bytes that are not an ONNX protobuf under a .onnx name: one line, exit 2.
cp run.tdump broken.onnx
driftscope guard broken.onnx --backends ort
