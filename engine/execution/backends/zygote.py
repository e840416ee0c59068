"""The zygote: a single-threaded process that forks worker processes on request.

A driver with threads must never fork itself (a lock held by another thread at that moment
stays locked forever in the child). Instead, the first time a worker is needed, the driver
starts this module as a fresh interpreter (fork + exec, safe from any thread). The zygote
imports what workers need once, then forks a worker per request: workers start in
milliseconds, with clean state, and never inherit the driver's threads, locks or GPU context.

Lifetimes: the zygote exits when the driver closes its control socket (also when the driver
is killed), and every worker asks the kernel for SIGKILL when the zygote dies; workers also
check that the driver is alive every half second.

Control protocol (one request, one reply, on a Unix socket; file descriptors passed with
SCM_RIGHTS): ``fork`` + (inbox, outbox) descriptors + environment overrides + modules to
preload -> pid; ``status`` pid -> exit code or None.

Preloading: a fork request may name heavy modules (see ``PRELOADABLE``) that the zygote
imports once before forking, so that every actor using them starts without importing them
again (importing torch takes more than a second).

Single-threaded: the zygote forks only while it has one thread. Arrow's jemalloc and numpy's
OpenBLAS would start threads, so the zygote runs with them off (``ZYGOTE_ENVIRONMENT``);
should a thread run all the same (the user's own settings of those, a preloaded module that
starts one, as some builds of torch do), the zygote starts each worker from then on as a
fresh interpreter (fork + exec), slower to start but safe.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys

_LEN = struct.Struct("<I")
_PR_SET_PDEATHSIG = 1

#: Modules the zygote may import before forking on request: heavy to import, and
#: initializing no device when imported.
PRELOADABLE = ("torch",)

#: Environment of the zygote (where the user set none of these): no background thread in
#: Arrow's jemalloc, no thread pool in OpenBLAS (numpy would start one per core at import).
#: Workers therefore run numpy's BLAS on one thread, one worker per CPU, as Ray's tasks do.
ZYGOTE_ENVIRONMENT = {
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
    "OPENBLAS_NUM_THREADS": "1",
}


def thread_count() -> int:
    """Threads of this process (1 where /proc cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _preload(names: list[str]) -> None:
    import importlib

    for name in names:
        if name in PRELOADABLE and name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # the worker imports it (and reports any error) itself
                pass


def send_message(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    payload = json.dumps(message).encode()
    data = _LEN.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def receive_message(sock: socket.socket, max_fds: int = 0) -> tuple:
    """(message, fds); raises EOFError when the other side is gone."""
    if max_fds:
        data, fds, _, _ = socket.recv_fds(sock, 65536, max_fds)
    else:
        data, fds = sock.recv(65536), []
    if not data:
        raise EOFError("the zygote control socket closed")
    while len(data) < _LEN.size or len(data) < _LEN.size + _LEN.unpack(data[: _LEN.size])[0]:
        more = sock.recv(65536)
        if not more:
            raise EOFError("the zygote control socket closed mid-message")
        data += more
    (length,) = _LEN.unpack(data[: _LEN.size])
    return json.loads(data[_LEN.size : _LEN.size + length]), list(fds)


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def _run_child(inbox_fd: int, outbox_fd: int, env: dict[str, str], driver_pid: int) -> None:
    die_with_parent()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the driver
    os.environ.update(env)
    torch = sys.modules.get("torch")  # preloaded: it read the thread count before the fork
    if torch is not None and "OMP_NUM_THREADS" in env:
        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    from shardflow.engine.execution.backends import process_worker

    code = 0
    try:
        process_worker.run_worker(inbox_fd, outbox_fd, driver_pid)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _start_fresh(fds: list[int], env: dict[str, str], driver_pid: int) -> int:
    """A worker started as a fresh interpreter (fork + exec: safe with threads)."""
    import subprocess

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            __spec__.name,
            "--worker",
            str(fds[0]),
            str(fds[1]),
            str(driver_pid),
        ],
        pass_fds=fds,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
    )
    process.returncode = 0  # reaped by serve(); keeps Popen from warning or reaping it
    return process.pid


def serve(control: socket.socket, driver_pid: int) -> None:
    exit_codes: dict[int, int] = {}
    children: set = set()

    def reap() -> None:
        for pid in list(children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                children.discard(pid)
                exit_codes.setdefault(pid, -1)
                continue
            if done:
                children.discard(pid)
                exit_codes[pid] = os.waitstatus_to_exitcode(status)

    while True:
        ready, _, _ = select.select([control], [], [], 0.5)
        reap()
        if not ready:
            continue
        try:
            message, fds = receive_message(control, max_fds=2)
        except (EOFError, ConnectionError, OSError):
            return
        if message["op"] == "fork":
            _preload(message.get("preload", []))
            if thread_count() > 1:
                pid = _start_fresh(fds, message.get("env", {}), driver_pid)
            else:
                pid = os.fork()
                if pid == 0:
                    control.close()
                    _run_child(fds[0], fds[1], message.get("env", {}), driver_pid)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            send_message(control, {"pid": pid})
        elif message["op"] == "status":
            reap()
            send_message(control, {"code": exit_codes.get(message["pid"])})


def main() -> None:
    if sys.argv[1] == "--worker":  # started fresh by a zygote that has threads
        _run_child(int(sys.argv[2]), int(sys.argv[3]), {}, int(sys.argv[4]))
    control_fd, driver_pid = int(sys.argv[1]), int(sys.argv[2])
    # No PDEATHSIG here: it would fire when the driver *thread* that started the zygote ends.
    # The zygote ends when the driver's end of the control socket closes instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=control_fd)
    # What every worker needs, imported once here and shared by every fork.
    import cloudpickle  # noqa: F401
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401

    from shardflow.engine.execution.backends import process_worker  # noqa: F401
    from shardflow.engine.execution.stages import transforms  # noqa: F401

    serve(control, driver_pid)


if __name__ == "__main__":
    main()
