"""A local cluster's data dir as a resource: one cluster per dir, held by a lock file
(``.cluster.lock``, flock) that the owning process writes its pid into, so a second start fails
with a clear message; ``cluster.json`` describing what runs there; and
``replog cluster down --data-dir DIR`` (``stop_cluster_in``), which stops a cluster started
elsewhere - through its supervisor, or by the pids cluster.json lists.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
from pathlib import Path

from harness import cluster_hosts
from harness.polling import Deadline, poll, wait_until
from harness.process import LocalClusterError, _alive, _cmdline

LOCK_FILE = ".cluster.lock"
CLUSTER_JSON = "cluster.json"
# The description while the cluster is not yet serving, with "ready": false: cluster.json
# itself appears only once it serves, so a script may wait for that file (docs/operations.md).
CLUSTER_STARTING_JSON = "cluster.starting.json"


def acquire_lock(data_dir: Path) -> int:
    """The data dir's lock, held (its fd, with this pid written in), or LocalClusterError
    naming who holds it or which processes of an earlier cluster still run there."""
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise LocalClusterError(
            f"a replog cluster is already running in {data_dir} (pid {holder}); "
            f"stop it first with: replog cluster down --data-dir {data_dir}") from None
    leftovers = _leftover_pids(data_dir)
    if leftovers:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise LocalClusterError(
            f"processes of an earlier cluster in {data_dir} are still running (pids "
            f"{', '.join(map(str, leftovers))}); stop them with: replog cluster down "
            f"--data-dir {data_dir}")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def release_lock(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_cluster_json(path: Path, description: dict) -> None:
    """Replace cluster.json whole (a reader never sees half of it)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_cluster_json(data_dir: Path) -> dict | None:
    """cluster.json, or the description of a cluster that never came to serve."""
    for name in (CLUSTER_JSON, CLUSTER_STARTING_JSON):
        try:
            return json.loads((data_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return None


def _owned_pids(info: dict) -> list[tuple[str, int, str]]:
    """(role, pid, marker) of the cluster's processes; a pid counts only while its command
    line still contains the marker (its config file), so a recycled pid is never signalled."""
    out = []
    for role in ("brokers", "controllers"):
        for p in info.get(role, []):
            if p.get("pid") and p.get("config_file"):
                out.append((role[:-1], int(p["pid"]), p["config_file"]))
    zk = [(n.get("pid"), n.get("config_file")) for n in info.get("zookeeper_nodes") or ()]
    zk.append((info.get("zookeeper_pid"), info.get("zookeeper_config")))
    for pid, config in dict.fromkeys(zk):  # a standalone server is listed both ways
        if pid and config:
            out.append(("zookeeper", int(pid), config))
    return out


def _leftover_pids(data_dir: Path) -> list[int]:
    info = _read_cluster_json(data_dir)
    if not info:
        return []
    return [pid for _, pid, marker in _owned_pids(info)
            if _alive(pid) and marker in _cmdline(pid)]


def _lock_holder(data_dir: Path) -> int | None:
    """The pid of the supervisor holding the data dir's lock, or None if it is free."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def stop_cluster_in(data_dir: str | os.PathLike[str], timeout: float = 120.0,
                    log=print) -> bool:
    """Stop the cluster of ``data_dir``: SIGTERM its supervisor (``cluster up``) and wait, or,
    if the supervisor is gone, stop the processes listed in cluster.json in order (brokers,
    controllers, ZooKeeper). Returns False if nothing was running."""
    data_dir = Path(data_dir).resolve()
    if not data_dir.is_dir():
        raise LocalClusterError(f"no such data dir: {data_dir}")
    holder = _lock_holder(data_dir)
    deadline = Deadline(timeout)
    stopped_any = False
    if holder is not None and holder > 0:
        log(f"Stopping the replog cluster supervisor (pid {holder}) of {data_dir}")
        os.kill(holder, signal.SIGTERM)
        wait_until(lambda: _lock_holder(data_dir) is None, timeout,
                   timed_out=lambda _: LocalClusterError(
                       f"the supervisor (pid {holder}) did not stop within {timeout:.0f}s"))
        stopped_any = True
    info = _read_cluster_json(data_dir)
    if info is None:
        if not stopped_any:
            raise LocalClusterError(f"no {CLUSTER_JSON} in {data_dir}: no cluster was started "
                                    f"there")
        return True
    for role in ("broker", "controller", "zookeeper"):
        pids = [pid for r, pid, marker in _owned_pids(info)
                if r == role and _alive(pid) and marker in _cmdline(pid)]
        for pid in pids:
            log(f"Stopping {role} (pid {pid})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)
        for pid in pids:
            if poll(lambda pid=pid: not _alive(pid), deadline.remaining()) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        stopped_any = stopped_any or bool(pids)
    cluster_hosts.cleanup_after_down(data_dir, log)
    return stopped_any
