"""The relay a sandbox without network uses to reach the forwarder: TCP in, Unix socket out.

Run as a file (standard library only, it imports nothing of skillopt-ci, so a sandbox needs only
this file, a Python interpreter and the forwarder's socket folder bound in)::

    python3 forward_relay.py SOCKET PORT -- COMMAND [ARG...]

It listens on ``127.0.0.1:PORT`` of the network namespace it runs in (bubblewrap's
``--unshare-net`` brings up a loopback of its own), then forks: the child carries each
connection's bytes both ways to ``SOCKET`` (it reads no HTTP and holds no credential), the parent
becomes ``COMMAND`` (``exec``: the agent CLI keeps the relay's process id, so the sandbox's
limits, exit code and kills apply to it as before). The child ends when the command does (it
watches its parent) and holds none of the command's output pipes. Exit 3 with a one-line
message when the port cannot be bound.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time

CHUNK = 65_536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                end.shutdown(how)


def _carry(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _die_with_parent() -> None:
    """Linux: the kernel kills this process as the command exits (``PR_SET_PDEATHSIG``); the
    polling in :func:`_watch_parent` covers other systems and the moment before it took effect."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def _serve(listener: socket.socket, path: str, parent: int) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # never hold the command's pipes: the sandbox reads them to their end
        os.dup2(devnull, fd)
    _die_with_parent()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            os._exit(0)
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: forward_relay.py SOCKET PORT -- COMMAND [ARG...]\n")
        return 2
    path, port, command = argv[0], argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(64)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"skillopt-ci relay: cannot listen on 127.0.0.1:{port}: {exc}\n")
        return 3
    parent = os.getpid()
    if os.fork() == 0:
        _serve(listener, path, parent)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"skillopt-ci relay: cannot start {command[0]}: {exc}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
