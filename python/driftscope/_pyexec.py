"""Child interpreters that never import from the working directory, and children that never
outlive the command that started them (SECURITY.md, "Child processes").

`python -m MODULE` and `python -c CODE` put the working directory first on sys.path, so a
`numpy.py`, `onnx.py` or `driftscope.py` in a pull request's checkout or a downloaded model folder
would run instead of the installed package. Python 3.11 has -P for exactly this; on 3.9 and 3.10
the bootstrap below deletes that first entry before anything is imported from sys.path (the
interpreter's own start-up imports, site and encodings, happen before the entry is added).
The C++ `driftscope` command starts `python -c` with the same bootstrap (cli/cmd_record.cpp).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from typing import Any, Callable, List, Mapping, Optional, Tuple

# -c leaves "" at sys.path[0]; -P (or PYTHONSAFEPATH) leaves nothing to delete.
_BOOTSTRAP = ("import sys\n"
              "if not getattr(sys.flags, 'safe_path', False): del sys.path[0]\n"
              "import runpy\n"
              "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")


def module_command(module: str, *args: str) -> List[str]:
    """argv for `python -m MODULE ARGS...` without the working directory on sys.path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _BOOTSTRAP.format(module=module), *args]


_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Asks the kernel to send `sig` to this process when its parent dies (Linux: prctl
    PR_SET_PDEATHSIG), so a backend child is not left running, reparented to init, when the
    guard is killed by a signal it cannot handle (SIGKILL). A no-op elsewhere. The parent may
    already be gone by the time this runs (reparented: getppid() changed): then the signal is
    sent here at once."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def kill_group(pgid: int) -> None:
    """SIGKILL to a process group started with start_new_session=True (a backend child and
    whatever it started); nothing when the group is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def signal_name(sig: int) -> str:
    """SIGSEGV, SIGKILL, ... for a signal number (a negative return code negated)."""
    import signal as _signal

    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def run_module(module: str, args: List[str], env: Mapping[str, str],
               timeout: Optional[float] = None) -> Tuple[int, List[str], bool]:
    """`python -m MODULE ARGS...` (module_command) in a process group of its own, stdin and
    stdout closed, waited for at most `timeout` seconds: (return code, the non-blank lines of its
    stderr, timed out). The whole group is killed on a time-out, and when the waiting parent is
    interrupted (^C, SIGTERM: the exception goes on). The same triple as the fork server's
    run (_guard/_forker.py), so a caller treats a forked and a fresh child alike."""
    import subprocess

    proc = subprocess.Popen(module_command(module, *args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(env),
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.communicate()
        return proc.returncode, [], True
    except BaseException:
        kill_group(proc.pid)
        proc.communicate()
        raise
    return proc.returncode, [ln for ln in err.decode("utf-8", "replace").splitlines()
                             if ln.strip()], False


def run_pickled_job(job_path: str, out_path: str, fn: Callable[[Any], Any]) -> int:
    """A child's whole life: read the pickled job, run `fn` on it, write its pickled result
    atomically (a `.part` file renamed into place, so the parent never reads half a result; a
    crash leaves no result, which the parent reports with the signal). No core file: a crash is
    reported by its signal."""
    import pickle

    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except Exception:  # pragma: no cover - platforms without it
        pass
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    result = fn(job)
    tmp = out_path + ".part"
    with open(tmp, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, out_path)
    return 0
