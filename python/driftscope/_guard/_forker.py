"""One forked process per backend, from a process that has already imported numpy, onnx,
driftscope and the runtimes of the backends the guard will run:
``python -m driftscope._guard._forker [MODULE | MODULE:FUNCTION ...]``.

Starting a Python interpreter and importing driftscope costs about half a second on a loaded
2-core machine, and importing a runtime as much again (OpenVINO ~0.8 s with its CPU plugin,
onnxruntime.quantization ~0.6 s); the guard runs one child per backend (and more for the probe
and the fallback). The parent starts this server once per guard() call with the modules its
backends name (Backend.preload); for each job it forks a fresh child, so the isolation is the
same as with one interpreter per backend: no session, no runtime thread pool is shared (every
session is created in the child), and a segfault kills that child alone. The parent itself
never forks: it may hold threads (a user's application, a runtime it imported) and fork() copies
only the calling thread.

Threads before fork: importing numpy starts OpenBLAS's pool (which handles fork itself),
importing onnxruntime 1.32 starts its telemetry dispatcher (asleep in a timed wait, waking every
few seconds) and OpenVINO one idle thread. A thread that holds a lock at the instant of fork()
leaves it locked in the child, so the server forks only when every other thread of it is asleep
in the kernel (_quiet); a child that hangs anyway is killed by the guard's timeout and reported.
A preloaded module's import never creates sessions or compiled models (those start the thread
pools); MODULE:FUNCTION warms what the import alone does not load (OpenVINO's CPU plugin).

Protocol, one line each way per job (text, on stdin / stdout):
    parent -> server: JOB.pkl RESULT.pkl STDERR.txt [MODULE:FUNCTION]
    server -> parent: pid PID            (as soon as the child exists: the parent may kill it)
    server -> parent: status WAITSTATUS  (when the child has been reaped)
The child runs driftscope._guard._child on the job, or FUNCTION(JOB.pkl, RESULT.pkl) of MODULE
when the line names one (driftscope replay's parts: driftscope._replay.cli).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, List, Optional, Sequence, Tuple

from .._pyexec import die_with_parent, kill_group, module_command

# What every child needs before its runtime; none of it starts threads of its own or holds
# state a runtime could corrupt across fork (numpy's BLAS pool handles fork itself).
PRELOAD = ("numpy", "onnx", "driftscope", "driftscope._guard._child",
           "driftscope._guard.backends.registry", "driftscope._guard._inputs")


def _busy_threads() -> List[str]:
    """The server's other threads that are not asleep in the kernel (state other than S)."""
    me = str(threading.get_native_id())
    busy = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # no procfs: nothing to wait for
        return []
    for tid in tasks:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                # "pid (comm) STATE ...": comm may hold spaces and parentheses.
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended
        if state != "S":
            busy.append(tid)
    return busy


def _quiet(limit_s: float = 0.2) -> None:
    """Waits (at most `limit_s`) until every other thread sleeps: a runtime's helper thread
    between two waits may hold a lock that fork() would copy locked into the child."""
    deadline = time.monotonic() + limit_s
    while _busy_threads() and time.monotonic() < deadline:
        time.sleep(0.001)


def _serve(inp: IO[str], out: IO[str]) -> None:
    for line in inp:
        parts = line.rstrip("\n").split("\0")
        if len(parts) not in (3, 4):
            continue
        job, result, err = parts[:3]
        entry = parts[3] if len(parts) == 4 else ""
        _quiet()
        pid = os.fork()
        if pid == 0:  # the child: exactly what `python -m driftscope._guard._child` does
            code = 1
            try:
                fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 2)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.close(out.fileno())  # the protocol is the server's alone
                sys.stdin = open(os.devnull)  # noqa: SIM115 - closed by os._exit
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                die_with_parent()
                if entry:
                    import importlib

                    module, _, func = entry.partition(":")
                    code = getattr(importlib.import_module(module), func)(job, result)
                else:
                    from ._child import main

                    code = main([job, result])
            except BaseException:  # noqa: BLE001 - shown in the parent as the last stderr line
                import traceback

                traceback.print_exc()
            finally:
                try:
                    sys.stderr.flush()
                except Exception:  # noqa: BLE001
                    pass
                os._exit(code)
        out.write(f"pid {pid}\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(f"status {status}\n")
        out.flush()


# Frameworks a PyTorch entry point may build its model with, and what of each the server imports
# for it: transformers' modeling code is ~2.7 CPU-seconds (transformers 5 imports torchao's
# quantizer integration with it whenever torchao is installed, as executorch makes it), which
# every child of a guard run on such a model paid again; a model class on top of it is ~0.05 s.
# The import starts no thread of its own beyond scipy's OpenBLAS pool (asleep, fork-safe as
# numpy's), and creates no model.
_FRAMEWORKS = (("transformers", "transformers.modeling_utils"),)


def _imported(path: str, function: str = "") -> List[str]:
    """The top-level names of the modules the Python source at `path` imports. With `function`
    (the entry point's), the bodies of the file's other top-level functions that nothing in it
    names are left out: the other entry points of a file of several models."""
    import ast

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read(1 << 22))
    except (OSError, SyntaxError, ValueError):
        return []
    if function:
        defs = {n.name: n for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        kept = [n for n in tree.body if n not in defs.values() or n.name == function]
        todo = list(kept)
        while todo:  # the top-level functions what is kept names, until none is added
            for name in {x.id for x in ast.walk(todo.pop()) if isinstance(x, ast.Name)}:
                if name in defs and defs[name] not in kept:
                    kept.append(defs[name])
                    todo.append(defs[name])
        tree.body = kept
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return names


def model_preload(model: str) -> List[str]:
    """What the server imports for the PyTorch entry point `model` (FILE.py:FUNCTION or
    MODULE:FUNCTION) beyond torch: the modeling code of a framework its source imports, itself
    or through a module of the user's it imports that this process has loaded (not an installed
    package). Read from the sources, never by running them (the server must not build a model:
    that starts torch's thread pool); [] when the source cannot be read."""
    part, _, function = model.rpartition(":")
    path = part
    if not (part.endswith(".py") or os.sep in part):
        try:
            import importlib.util

            spec = importlib.util.find_spec(part)
            path = spec.origin if spec is not None and spec.origin else ""
        except (ImportError, ValueError):
            return []
    names = _imported(path, function)
    for name in list(names):
        own = getattr(sys.modules.get(name), "__file__", None) or ""
        if own.endswith(".py") and "-packages" + os.sep not in own and own != path:
            names += _imported(own)
    return [module for name, module in _FRAMEWORKS if name in names]


def preload(names: Sequence[str]) -> None:
    """Imports MODULE (and calls FUNCTION of MODULE:FUNCTION); a module that does not import
    or a warm-up that fails is left to the child, which reports it as the backend's error."""
    import importlib

    for name in names:
        module, _, func = name.partition(":")
        try:
            mod = importlib.import_module(module)
            if func:
                getattr(mod, func)()
        except Exception:  # noqa: BLE001 - the child meets it again and says what it is
            pass


def main(argv: Sequence[str] = ()) -> int:
    # The parent decides when the server ends; if the parent is killed outright (SIGKILL), the
    # kernel ends the server, and each child's own parent-death signal ends the child.
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The protocol has a descriptor of its own: what a preloaded runtime prints, through
    # sys.stdout or to descriptor 1, goes where the server's stderr goes, never into its lines.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    preload(list(PRELOAD) + list(argv))
    proto.write("ready\n")
    proto.flush()
    _serve(sys.stdin, proto)
    return 0


class Forker:
    """The parent's side: start() once, run() per job, close() at the end. run() returns
    (returncode as subprocess gives it: negative for a signal, stderr lines), or None when the
    server itself is gone (the caller then starts a plain interpreter instead)."""

    def __init__(self, env: dict, preload: Sequence[str] = ()) -> None:
        # A session (and process group) of its own: the children it forks share it, so close()
        # ends them all with one killpg, and a terminal's ^C reaches the guard alone, which
        # decides (SECURITY.md, "Child processes").
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            module_command("driftscope._guard._forker", *preload), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0,
            start_new_session=True)
        self._ready = False
        self._buf = b""

    def _line(self, timeout: Optional[float]) -> Optional[str]:
        """The server's next line; "" when none came within `timeout`, None at its end. Read
        from the pipe itself, never through a buffered reader: select() would not see a line a
        reader had already pulled in with the one before."""
        import time

        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            if deadline is not None:
                ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
                if not ready:
                    return ""
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def run(self, job: str, result: str, err: str, timeout: Optional[float], entry: str = ""
            ) -> Optional[Tuple[int, List[str], bool]]:
        """(returncode, stderr lines, timed out); `entry` (MODULE:FUNCTION) is what the child
        runs instead of the guard's _child (no limit when `timeout` is None)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            if not self._ready:
                if self._line(60.0) != "ready":
                    self.close()
                    return None
                self._ready = True
            assert self.proc.stdin is not None
            self.proc.stdin.write(("\0".join((job, result, err) + ((entry,) if entry else ()))
                                   + "\n").encode())
            first = self._line(30.0)
            if not first or not first.startswith("pid "):
                self.close()
                return None
            pid = int(first.split()[1])
            status = self._line(timeout)
            timed_out = status == ""
            if timed_out:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                status = self._line(30.0)
            if not status or not status.startswith("status "):
                self.close()
                return None
            code = os.waitstatus_to_exitcode(int(status.split()[1]))
        except (OSError, ValueError):
            self.close()
            return None
        try:
            with open(err, "rb") as f:
                tail = f.read()[-65536:].decode("utf-8", "replace").splitlines()
        except OSError:
            tail = []
        return code, [ln for ln in tail if ln.strip()], timed_out

    def close(self, kill: bool = False) -> None:
        """Ends the server: at its end of input when idle; with `kill` (the guard is being
        interrupted or terminated), or when it does not end within 10 s, SIGKILL to its whole
        process group, the running child included."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if kill:
                kill_group(proc.pid)
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - never leave it behind
            kill_group(proc.pid)
            proc.wait()
        except BaseException:  # a second ^C or SIGTERM while waiting
            kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            kill_group(proc.pid)  # a child the server left running
            if proc.stdout is not None:
                proc.stdout.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
