"""The cluster finds the worker behind a held request by its socket: the right one."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.support.cluster import _socket_inode, _socket_inodes


@contextmanager
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server
    finally:
        server.close()


def connect_from(port: int, server: socket.socket) -> socket.socket:
    """A client socket on local `port` (shared with others, as Linux's ephemeral ports are)."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    client.bind(("127.0.0.1", port))
    client.connect(server.getsockname())
    return client


def test_the_socket_is_the_one_to_the_named_peer_when_its_local_port_is_shared() -> None:
    """Linux gives one ephemeral port to connections to other destinations at once: the local
    port alone named whichever came first in /proc/net/tcp, and the held request's worker was
    then 'not found' (seen in CI)."""
    with ExitStack() as stack:
        other = stack.enter_context(listener())
        qdrant = stack.enter_context(listener())
        first = stack.enter_context(connect_from(0, other))
        port = first.getsockname()[1]
        second = stack.enter_context(connect_from(port, qdrant))
        accepted = [stack.enter_context(s.accept()[0]) for s in (other, qdrant)]
        assert accepted
        mine = _socket_inodes(os.getpid())
        found = _socket_inode(port, qdrant.getsockname()[1])
        assert found in mine
        assert found == str(os.fstat(second.fileno()).st_ino)
        assert found != str(os.fstat(first.fileno()).st_ino)
