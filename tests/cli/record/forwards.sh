DRIFTSCOPE_PYTHON=fakepy/echo driftscope record tflite m.tflite --input x=a.npy -o "out dir/r.tdump" --help
