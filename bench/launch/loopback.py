"""Sockets and stores for this machine alone: every port pipebench opens listens on 127.0.0.1.

TCPStore takes no address to bind and listens on every interface, where anyone who reaches the host
could set keys and stop or distort a run; it does take a socket that listens already
(`master_listen_fd`), which is how the parent's control store (bench/launch/sessions.py) and torchrun's own
stores (bench/launch/torchrun_agent.py) stay on the loopback address. The collectives' sockets follow the
loopback interface (`loopback_interface`, for GLOO_ and NCCL_SOCKET_IFNAME).
"""
from __future__ import annotations

import ipaddress
import socket

__all__ = ["free_port", "is_loopback", "loopback_store", "listen_on_loopback", "loopback_interface"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_loopback(host: str) -> bool:
    """127.0.0.1, ::1 or localhost: a store there is for this machine alone."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_store(port: int = 0, **options):
    """A TCPStore server (torch.distributed.TCPStore) that listens on 127.0.0.1 only."""
    from torch.distributed import TCPStore

    fd, port = listen_on_loopback(port)
    return TCPStore("127.0.0.1", port, is_master=True, master_listen_fd=fd, **options)


def listen_on_loopback(port: int) -> tuple[int, int]:
    """A socket listening on 127.0.0.1:`port` (0: a free one), as (file descriptor, port): the bare
    descriptor, which the TCPStore given it as `master_listen_fd` then owns."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    port = listener.getsockname()[1]
    return listener.detach(), port


def loopback_interface() -> str | None:
    """The loopback interface's name ("lo" on Linux, "lo0" on macOS), for GLOO_ and NCCL_SOCKET_IFNAME."""
    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        return None
    return next((name for name in ("lo", "lo0") if name in names), None)
