"""One local Ray cluster per test module that needs one, kept off the network.

Ray's start-up asks cloud metadata servers what machine it is on; with ``http_proxy`` and
``https_proxy`` pointing at a closed port on the loopback, those requests fail at once on this
machine. rlpipe's own session (:func:`rlpipe.distributed.ray_session`) keeps the cluster on
127.0.0.1 with usage statistics and the dashboard off.
"""
from __future__ import annotations

import socket
from collections.abc import Iterator
from types import ModuleType

import pytest

from rlpipe.config.schema import DistributedConfig
from rlpipe.distributed import ray_session

PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")


def closed_loopback_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[ModuleType]:
    """A 2-CPU local Ray cluster for the module, started the way ``rlpipe train --backend ray`` starts one."""
    proxy = f"http://127.0.0.1:{closed_loopback_port()}"
    with pytest.MonkeyPatch.context() as env:
        for var in PROXY_VARS:
            env.setenv(var, proxy)
        with ray_session(DistributedConfig(object_store_mb=256), num_collectors=2) as ray:
            yield ray
