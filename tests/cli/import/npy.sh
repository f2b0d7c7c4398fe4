"$PYTHON" -c "import numpy as np; np.save(\"logits.npy\", np.array([[1.5, -2.0]], dtype=\">f8\"))"
driftscope import logits.npy logits.tdump -q && driftscope show logits.tdump logits
