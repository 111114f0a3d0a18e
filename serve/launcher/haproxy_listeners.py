"""HAProxy's side listeners on loopback under ``steadyrank serve``.

Ray Serve's HAProxy configuration binds two listeners besides the HTTP front on every interface,
with no setting for their address: the stats page (``RAY_SERVE_HAPROXY_STATS_PORT``) and the
Prometheus frontend (``RAY_SERVE_HAPROXY_METRICS_PORT``). Nothing needs them from another machine
(steadyrank's metrics are on the HTTP port; Ray reads HAProxy through its admin and metrics unix
sockets), so a local head puts them on 127.0.0.1: :func:`install` writes a wrapper and points
``RAY_SERVE_HAPROXY_BINARY_PATH`` at it; each time Ray starts HAProxy (first start and every
reload), the wrapper runs :func:`main`, which rewrites the ``bind`` lines of those two ports in the
configuration file Ray passes (``-f``), under Ray's own lock on that file, and then becomes the real
HAProxy (``exec``, same pid and arguments, so Ray and :mod:`serve.launcher.lifecycle` still know it). The
HTTP front's ``bind`` line (the server's own address) is left as Ray wrote it.

Run as ``python -m steadyrank.serve.launcher.haproxy_listeners REAL_HAPROXY ARGS…``; imports nothing
but the standard library.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import sys
from collections.abc import Collection, MutableMapping
from pathlib import Path

#: the variables naming the side listeners' ports (set by :func:`serve.launcher.ray_env.apply_haproxy_env`)
SIDE_PORT_VARIABLES = ("RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT")
BINARY_VARIABLE = "RAY_SERVE_HAPROXY_BINARY_PATH"
WRAPPER = "haproxy-loopback"


def loopback_binds(config: str, ports: Collection[int]) -> str:
    """``config`` with every ``bind [ADDRESS]:PORT`` line of one of ``ports`` bound to 127.0.0.1
    instead (the rest of each line kept)."""
    wanted = {str(port) for port in ports}

    def rebind(found: re.Match[str]) -> str:
        return f"{found.group(1)}127.0.0.1:{found.group(3)}" if found.group(3) in wanted else found.group(0)

    return re.sub(r"^(\s*bind\s+)(\S*):(\d+)\b", rebind, config, flags=re.M)


def rewrite(config_file: Path, ports: Collection[int]) -> None:
    """Apply :func:`loopback_binds` to ``config_file`` in place, holding the ``<file>.lock`` that Ray
    holds while it writes the file."""
    with open(f"{config_file}.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            text = config_file.read_text(encoding="utf-8")
            changed = loopback_binds(text, ports)
            if changed != text:
                config_file.write_text(changed, encoding="utf-8")
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def side_ports(environ: MutableMapping[str, str] = os.environ) -> list[int]:
    return [int(environ[name]) for name in SIDE_PORT_VARIABLES if environ.get(name, "").isdigit()]


def main(argv: list[str]) -> None:
    """``argv``: the real HAProxy binary, then Ray's arguments for it."""
    real, *args = argv
    if "-f" in args and args.index("-f") + 1 < len(args):
        rewrite(Path(args[args.index("-f") + 1]), side_ports())
    os.execv(real, [real, *args])


def install(folder: Path, real_binary: str, environ: MutableMapping[str, str] = os.environ) -> Path:
    """Write the wrapper into ``folder`` (the server's HAProxy folder) and point Ray at it
    (:data:`BINARY_VARIABLE`); returns its path."""
    wrapper = folder / WRAPPER
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m steadyrank.serve.launcher.haproxy_listeners "
                       f"{shlex.quote(real_binary)} \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    environ[BINARY_VARIABLE] = str(wrapper)
    return wrapper


if __name__ == "__main__":
    main(sys.argv[1:])
