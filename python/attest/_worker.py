"""Fault containment: the callable runs in a worker process, attest's gate in this one.

A CUDA fault (misaligned address, illegal access, device-side assert) leaves the CUDA context
broken for the rest of the process, and a segfault, abort or hang takes the process with it. So
the gate (C++, in this process) never touches the device: each kernel call is handed to a worker
process, which owns the device context and calls the callable. When a call faults, the worker
reports it (or dies, or misses its deadline and is killed); that call becomes a `fault` verdict
(the C++ engine's, through the plugin ABI's ATTEST_PLUGIN_RUN_FAULT), and the next call starts a
fresh worker. Every verdict after a fault is therefore as valid as one before it.

Tensors cross through one shared, file-backed buffer (/dev/shm): attest's input storage is copied
in whole (strides, pads and guard patterns included), the worker builds the same strided views on
it, and only the logical output elements are copied back, so guard zones and pad gaps keep their
pattern unless the callable wrote there. The worker is forked (the callable is inherited, never
pickled); a parent that has already initialised CUDA cannot fork a usable CUDA child, so then the
worker is spawned and the callable travels by cloudpickle, which serialises closures, lambdas,
bound methods and functools.partial by value (ATTEST_WORKER_START=fork|spawn forces a method).
A worker that cannot be started or reached is attest's failure, not the kernel's: WorkerUnavailable
(an AttestError naming the cause and the remedy), never a row.
"""
from __future__ import annotations

import ctypes
import dataclasses
import faulthandler
import mmap
import multiprocessing as mp
import os
import pickle
import signal
import tempfile
import time
import traceback
from typing import Optional

import numpy as np

from . import _call as C
from . import _native as N

_ALIGN = 256  # bytes: every tensor's storage in the shared buffer starts on this boundary
START_ENV = "ATTEST_WORKER_START"  # auto (default), fork or spawn
START_TIMEOUT = 300.0  # seconds a started worker has to say it is ready (a spawned one imports torch)


class WorkerUnavailable(N.AttestError):
    """attest could not start or reach a worker process: its own failure, raised by the gate
    instead of rows blamed on the kernel."""


_PARENT_RUNS_CUDA = False  # a gate of this process judged on the device engine (start_method)


def start_method(device_oracles: bool = False) -> str:
    """fork, or spawn where the parent has initialised CUDA (a forked child of it cannot use
    CUDA) or will: a gate judged on the device engine (device_oracles, device="cuda") runs
    gpu.ref64 in this process, so a worker restarted after a fault, or the next gate's, would be
    forked from a parent with a live CUDA context. ATTEST_WORKER_START=fork|spawn overrides."""
    forced = os.environ.get(START_ENV, "auto").strip() or "auto"
    if forced not in ("auto", "fork", "spawn"):
        raise N.AttestError(f"{START_ENV}='{forced}' is not auto, fork or spawn")
    if forced != "auto":
        return forced
    global _PARENT_RUNS_CUDA
    if device_oracles:
        _PARENT_RUNS_CUDA = True  # from now on: libattest_py's CUDA context may be live here
    if _PARENT_RUNS_CUDA:
        return "spawn"
    try:
        torch = C._torch()
    except Exception:  # noqa: BLE001 (a callable that does not use torch)
        return "fork"
    return "spawn" if torch.cuda.is_initialized() else "fork"


def _has_cloudpickle() -> bool:
    try:
        import cloudpickle  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _payload(spec) -> bytes:
    """The declarations a spawned worker needs, pickled: cloudpickle takes closures, lambdas,
    bound methods and partials by value; supports= is left out (the parent asks it)."""
    spec = dataclasses.replace(spec, supports=None, stats={}, last_error=None)
    try:
        import cloudpickle  # noqa: PLC0415 (only a spawned worker needs it)
    except ImportError as e:
        try:
            return pickle.dumps(spec)
        except Exception as e2:  # noqa: BLE001
            raise WorkerUnavailable(
                f"cannot start a worker process (spawn) for callable '{spec.name}': it does not pickle "
                f"({type(e2).__name__}: {e2}) and cloudpickle, which would carry it, is not installed; "
                f"install it (pip install cloudpickle) or pass isolate=False") from e
    try:
        return cloudpickle.dumps(spec)
    except Exception as e:  # noqa: BLE001
        raise WorkerUnavailable(
            f"cannot start a worker process (spawn) for callable '{spec.name}': cloudpickle cannot serialise it "
            f"({type(e).__name__}: {e}); keep what does not pickle (locks, open files, device streams) out of "
            f"what fn closes over, or pass isolate=False") from e


def _extent(t: N.Tensor) -> int:
    """Elements of storage a strided tensor spans (0 for an empty one)."""
    if any(t.shape[i] == 0 for i in range(t.rank)):
        return 0
    return 1 + sum((t.shape[i] - 1) * t.strides[i] for i in range(t.rank))


def _view(buf, offset: int, shape, strides) -> np.ndarray:
    n = 1 + sum((a - 1) * s for a, s in zip(shape, strides)) if all(shape) else 0
    flat = np.frombuffer(buf, dtype=np.float32, count=n, offset=offset)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=tuple(4 * s for s in strides))


class _Shared:
    """A growable file-backed shared buffer (one file in /dev/shm, replaced when it must grow)."""

    def __init__(self):
        self.path: Optional[str] = None
        self.size = 0
        self.map: Optional[mmap.mmap] = None

    def ensure(self, size: int) -> None:
        if size <= self.size:
            return
        self.close()
        size = max(size, 1 << 20)
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, self.path = tempfile.mkstemp(prefix="attest-worker-", dir=folder)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.size = size

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        self.path, self.size = None, 0


def _cuda_broken(torch) -> bool:
    """Whether this process's CUDA context is unusable (a sticky error): a synchronise and a tiny
    kernel must both succeed in a healthy one."""
    try:
        torch.cuda.synchronize()
        x = torch.ones(1, device="cuda")
        return float((x + 1).item()) != 2.0
    except Exception:  # noqa: BLE001
        return True


def classify(spec, e: BaseException) -> int:
    """The plugin ABI's return code for an exception raised by the callable."""

    text = f"{type(e).__name__}: {e}"
    if isinstance(e, (N.Unsupported, NotImplementedError)) or any(m in text for m in C.REFUSAL_MARKERS):
        return N.RUN_REFUSED
    if "out of memory" in text.lower() or type(e).__name__ == "OutOfMemoryError":
        return N.RUN_FAULT
    if spec.device.startswith("cuda"):
        try:
            torch = C._torch()
            if torch.cuda.is_initialized() and _cuda_broken(torch):
                return N.RUN_FAULT
        except Exception:  # noqa: BLE001
            return N.RUN_FAULT
    return N.RUN_ERROR


def _serve(conn, spec) -> None:
    """The worker's loop: a ready message (or why it cannot serve), then one message per kernel
    call, one reply each, until told to stop. `spec` is the Spec (forked) or its _payload (spawned)."""

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker ends
    faulthandler.disable()  # a fault is reported by the parent as a verdict, not as a stack dump
    if isinstance(spec, bytes):
        try:
            spec = pickle.loads(spec)
        except BaseException as e:  # noqa: BLE001 (the parent raises it as WorkerUnavailable)
            conn.send({"ready": False, "text": f"the callable cannot be rebuilt in the spawned worker "
                                               f"({type(e).__name__}: {e})".replace("\n", " ")})
            return
    conn.send({"ready": True})
    try:
        torch = C._torch()
        # A forked child inherits the parent's thread-pool state but not its threads: one
        # intra-op thread keeps OpenMP from waiting on threads that do not exist here.
        torch.set_num_threads(1)
    except Exception:  # noqa: BLE001
        pass
    path, mapped = None, None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        if msg["path"] != path:
            if mapped is not None:
                try:
                    mapped.close()
                except BufferError:  # a tensor the callable kept still points into it: leave it mapped
                    pass
            fd = os.open(msg["path"], os.O_RDWR)
            try:
                mapped = mmap.mmap(fd, msg["size"])
            finally:
                os.close(fd)
            path = msg["path"]
        views = [None if t is None else _view(mapped, *t) for t in msg["tensors"]]
        t0 = time.perf_counter()
        try:
            fn_s = C.run_views(spec, msg["problem"], msg["config"], *views)
            del views
            conn.send({"rc": 0, "fn_s": fn_s, "seconds": time.perf_counter() - t0})
        except BaseException as e:  # noqa: BLE001 (everything the callable raises is reported)
            del views
            rc = classify(spec, e)
            conn.send({"rc": rc, "text": f"{type(e).__name__}: {e}".replace("\n", " "),
                       "traceback": traceback.format_exc()})
            if rc == N.RUN_FAULT:
                conn.close()
                os._exit(70)  # a broken device context is never reused


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Worker:
    """The parent's handle: starts a worker when needed, sends calls, turns deaths into faults."""

    def __init__(self, spec, timeout: float):
        self.spec = spec
        self.timeout = timeout
        self.shared = _Shared()
        self.proc = None
        self.conn = None
        self.history: list[dict] = []  # one entry per worker started: pid, calls, problems, end

    def _start(self) -> None:
        method = start_method(getattr(self.spec, "oracles", "host") == "device")
        ctx = mp.get_context(method)
        payload = self.spec if method == "fork" else _payload(self.spec)
        what = f"a worker process ({method}) for callable '{self.spec.name}'"
        parent, child = ctx.Pipe()
        try:
            proc = ctx.Process(target=_serve, args=(child, payload), daemon=True, name="attest-worker")
            proc.start()
        except Exception as e:  # noqa: BLE001
            raise WorkerUnavailable(f"cannot start {what}: {type(e).__name__}: {e}; pass isolate=False to call fn "
                                    f"in this process") from e
        child.close()
        try:
            hello = parent.recv() if parent.poll(START_TIMEOUT) else {"ready": False, "text": f"no answer within "
                                                                                               f"{START_TIMEOUT:g} s"}
        except (EOFError, OSError):
            proc.join(5)
            hello = {"ready": False, "text": f"it ended before it was ready (exit code {proc.exitcode})"}
        if not hello.get("ready"):
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            parent.close()
            hint = "" if method == "fork" or _has_cloudpickle() else " (install cloudpickle to carry fn by value)"
            raise WorkerUnavailable(f"cannot start {what}: {hello.get('text')}; a spawned worker rebuilds fn in a "
                                    f"fresh interpreter (its modules must import there){hint}, or pass isolate=False")
        self.proc, self.conn = proc, parent
        self.history.append({"worker": len(self.history) + 1, "pid": proc.pid, "method": method, "calls": 0,
                             "problems": [], "ended": "running"})

    def start(self) -> None:
        """Starts the worker now (the gate does so before its first case: a callable that cannot
        reach a worker is one WorkerUnavailable, not a row per case)."""
        if self.proc is None:
            self._start()

    def _end(self, why: str, kill: bool) -> None:
        if self.proc is None:
            return
        if kill and self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.history[-1]["ended"] = why
        try:
            self.conn.close()
        except OSError:
            pass
        self.proc, self.conn = None, None

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(5)
            self._end("end of gate", kill=True)
        self.shared.close()

    def call(self, a: N.RunArgs) -> tuple[int, str, float]:
        """(rc, message, seconds inside fn) for one attest call."""
        p = a.problem.contents
        tensors_c = [a.q, a.k, a.v, a.out, a.lse]
        layout, offset = [], 0
        for t in tensors_c:
            if not t:
                layout.append(None)
                continue
            c = t.contents
            if c.dtype != N.DTYPE["f32"]:
                return N.RUN_ERROR, "tensor dtype is not float32", 0.0
            layout.append((offset, tuple(c.shape[i] for i in range(c.rank)), tuple(c.strides[i] for i in range(c.rank)),
                           _extent(c)))
            offset += (_extent(c) * 4 + _ALIGN - 1) // _ALIGN * _ALIGN
        try:
            self.shared.ensure(offset)
        except OSError as e:
            raise WorkerUnavailable(f"cannot make the {offset} byte buffer shared with worker processes "
                                    f"({type(e).__name__}: {e}); free space in /dev/shm or pass isolate=False") from e
        buf = self.shared.map
        for t, lay in zip(tensors_c, layout):
            if lay is None or lay[3] == 0:
                continue
            src = np.frombuffer((ctypes.c_float * lay[3]).from_address(t.contents.data), dtype=np.float32)
            np.frombuffer(buf, dtype=np.float32, count=lay[3], offset=lay[0])[:] = src
        if self.proc is None:
            self._start()
        info = self.history[-1]
        info["calls"] += 1
        text = p.text.decode() if p.text else ""
        if text and text not in info["problems"]:
            info["problems"].append(text)
    
        problem = C._problem_dict(p)
        problem["ragged"] = bool(p.cu_seqlens_q)
        msg = {"path": self.shared.path, "size": self.shared.size, "problem": problem,
               "config": a.config.decode() if a.config else "", "tensors": [None if x is None else x[:3] for x in layout]}
        where = f"{text}" + (f" config {msg['config']}" if msg["config"] else "")
        try:
            self.conn.send(msg)
            ready = self.conn.poll(self.timeout)
        except (OSError, EOFError, BrokenPipeError):
            ready = True
        if not ready:
            self._end(f"killed: no answer within {self.timeout:g} s on {where}", kill=True)
            return N.RUN_FAULT, f"hang: no answer within the per-call timeout of {self.timeout:g} s on {where} " \
                                f"(worker {info['worker']}, pid {info['pid']}, killed)", 0.0
        try:
            reply = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            how = _signal_name(code) if code is not None and code < 0 else f"exit code {code}"
            self._end(f"died ({how}) on {where}", kill=True)
            return N.RUN_FAULT, f"worker {info['worker']} (pid {info['pid']}) died ({how}) during the call on {where}", 0.0
        if reply["rc"] == N.RUN_FAULT:
            self._end(f"fault on {where}: {reply['text'][:200]}", kill=True)
        if reply["rc"] != 0:
            self.spec.last_error = reply.get("traceback")
            return reply["rc"], reply["text"], 0.0
        for t, lay in zip(tensors_c[3:], layout[3:]):  # only the logical output elements go back
            if lay is None or lay[3] == 0:
                continue
            c = t.contents
            dst = np.lib.stride_tricks.as_strided(
                np.frombuffer((ctypes.c_float * lay[3]).from_address(c.data), dtype=np.float32),
                shape=lay[1], strides=tuple(4 * s for s in lay[2]))
            np.copyto(dst, _view(buf, *lay[:3]))
        return 0, "", reply["fn_s"]
