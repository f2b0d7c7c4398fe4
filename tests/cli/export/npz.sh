driftscope export run.tdump out.npz
"$PYTHON" -c "import numpy as np; z = np.load(\"out.npz\"); [print(k, z[k].dtype, z[k].shape) for k in z]"
