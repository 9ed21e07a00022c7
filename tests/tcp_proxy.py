"""A TCP proxy the fault tests control: it stands between the engine and PostgreSQL.

``ProxyServer(("127.0.0.1", 5432))`` listens on a free loopback port and forwards every
connection to the server. The test can :meth:`cut` every open connection (as a server restart
does), take the server :meth:`down` (new connections are accepted and closed at once) and
bring it :meth:`up` again, or :meth:`cut_after_commit`: the next time a client sends
``COMMIT``, the proxy forwards it, waits for the server to act on it, and cuts that
connection before the reply reaches the client (the client cannot know the outcome).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["ProxyServer"]


class ProxyServer:
    """A loopback TCP proxy with fault switches (threads; stopped by :meth:`close`)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._down = False
        self._closed = False
        self._commit_trap = False
        self.trapped_commits = 0
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._pairs.append((client, server))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                trapped = upstream and self._commit_trap and b"COMMIT" in data
                sink.sendall(data)
                if trapped:
                    with self._lock:
                        self._commit_trap = False
                        self.trapped_commits += 1
                    time.sleep(0.3)  # the server commits; its reply never gets through
                    self._close_pair(source, sink)
                    return
        except OSError:
            pass
        self._close_pair(source, sink)

    def _close_pair(self, a: socket.socket, b: socket.socket) -> None:
        for sock in (a, b):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def upstream_ports(self) -> list[int]:
        """The local ports of the proxy's open connections to the server (the
        ``client_port`` the server's ``pg_stat_activity`` shows for them)."""
        with self._lock:
            return [server.getsockname()[1] for _, server in self._pairs if server.fileno() >= 0]

    def cut(self) -> None:
        """Close every open connection, both ways (the server and the clients see EOF)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            self._close_pair(client, server)

    def down(self) -> None:
        """Cut every connection and refuse new ones until :meth:`up`."""
        self._down = True
        self.cut()

    def up(self) -> None:
        """Accept and forward connections again."""
        self._down = False

    def cut_after_commit(self) -> None:
        """Arm the trap: the next COMMIT reaches the server, its reply never the client."""
        self._commit_trap = True

    def close(self) -> None:
        """Stop listening and cut everything."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()
