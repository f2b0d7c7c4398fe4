"$PYTHON" -c "import numpy as np; np.savez(\"evil.npz\", x=np.array([{}], dtype=object))"
driftscope import evil.npz out.tdump; echo "exit $?"; ls out.tdump 2>&1 || true
