# A backend name the guard does not know: the error lists the known ones.
printf 'def build():\n    raise SystemExit("not reached")\n' > net.py
driftscope guard --model net.py:build --backends torch,ort-fp17
