"""The listening socket of ``memory-ledger ui`` and ``mcp --http``, bound before the server
starts, so that a bad address is refused in words and with the CLI's exit status 2.

Without it, uvicorn binds when it starts: a port outside 0-65535 raised ``OverflowError``,
an unresolvable host ``socket.gaierror``, and a port in use was logged by uvicorn before
it exited with status 3. :func:`listen_socket` checks the port (1-65535, or 0 for a free
one where the command allows it) and the host, binds, and raises
:class:`~memory_ledger.ledger.errors.ListenAddressError` or
:class:`~memory_ledger.ledger.errors.ListenError`; the server then serves on that socket
(no window between the check and the bind).
"""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

from memory_ledger.ledger.errors import ListenAddressError, ListenError

__all__ = ["check_port", "listen_socket", "stopped_by_sigterm"]

_REASONS = {
    errno.EADDRINUSE: ("address_in_use", "the port is in use (another server listens there)"),
    errno.EADDRNOTAVAIL: ("address_not_available", "it is not an address of this machine"),
    errno.EACCES: ("address_forbidden", "permission denied (ports below 1024 need privileges)"),
}


def check_port(port: int, option: str, *, free: bool = False) -> int:
    """``port`` when it is a TCP port (1-65535; 0 too with ``free``: the system picks one).

    :raises ListenAddressError: anything else, naming ``option``.
    """
    low = 0 if free else 1
    if not low <= port <= 65535:
        also = " (0: a free one)" if free else ""
        msg = f"{option} must be a TCP port from 1 to 65535{also}, got {port}"
        raise ListenAddressError(msg, parameter=option)
    return port


def listen_socket(host: str, port: int, *, host_option: str, port_option: str) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (port 0: a free one, read it with
    ``getsockname()``), ``SO_REUSEADDR`` set as uvicorn sets it, not yet listening (the
    server listens on it). ``host_option``/``port_option`` name the options in errors.

    :raises ListenAddressError: the port is out of range (:func:`check_port`, 0 allowed),
        or the host is neither an IP address nor a name that resolves.
    :raises ListenError: the system refuses the bind (reason ``address_in_use``,
        ``address_not_available``, ``address_forbidden``, else ``listen_failed``).
    """
    check_port(port, port_option, free=True)
    name = host.strip("[]")
    try:
        found = socket.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as e:
        msg = f"{host_option} {host!r} is neither an IP address nor a host name that resolves"
        raise ListenAddressError(msg, parameter=host_option) from e
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        code, why = _REASONS.get(e.errno or 0, ("listen_failed", e.strerror or type(e).__name__))
        shown = f"[{name}]" if ":" in name else name
        raise ListenError(f"cannot listen on {shown}:{port}: {why}", reason_code=code) from e
    sock.set_inheritable(True)
    return sock


TERMINATED_EXIT = 128 + signal.SIGTERM
"""The exit status of a server stopped by SIGTERM, once it has closed its store (143)."""


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """A SIGTERM (how systemd and docker stop a service) ends the server as Ctrl-C does: it
    shuts down, then ``SystemExit(143)`` unwinds the command, so the store is closed and a
    projection file that may hold an erased namespace's rows is rewritten before the process
    ends. uvicorn catches SIGTERM while it serves and raises it again once it has stopped;
    with the default handler that killed the process before any ``finally`` ran. The handler
    is this command's own (the CLI owns its process) and is restored on exit; outside the
    main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(TERMINATED_EXIT)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
