"""``meta.properties``: which broker and cluster a log dir belongs to, and the dir's id.

Kafka writes it in java.util.Properties form; replog writes the ZooKeeper-era version 0 with
the ``directory.id`` that KIP-858 added (a 22-character url-safe base64 UUID), so a log dir
moved to another broker or cluster is refused instead of silently served.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable

from broker.storage.errors import LogDirError
from broker.storage.fileops import FileOps

META_PROPERTIES = "meta.properties"


def new_directory_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                props[k.strip()] = v.strip()
                break
        else:
            props[line] = ""
    return props


def load_or_create(log_dir: str, broker_id: int, cluster_id: str | None,
                   fileops: FileOps, *, new_id: Callable[[], str] = new_directory_id,
                   clock_ms: Callable[[], int] | None = None) -> dict[str, str]:
    """Return the dir's properties, creating them on first use; raise LogDirError on a
    broker.id or cluster.id that does not match. ``new_id`` makes a directory.id and
    ``clock_ms`` dates the file's header (the cluster simulation passes deterministic ones,
    so a seed replays its disks byte for byte)."""
    path = os.path.join(log_dir, META_PROPERTIES)
    try:
        if fileops.exists(path):
            props = parse_properties(fileops.read_file(path).decode("utf-8"))
            if props.get("broker.id") != str(broker_id):
                raise LogDirError(log_dir, detail=f"{path} has broker.id={props.get('broker.id')} "
                                  f"but this broker is {broker_id}")
            if cluster_id and props.get("cluster.id") and props["cluster.id"] != cluster_id:
                raise LogDirError(log_dir, detail=f"{path} has cluster.id={props['cluster.id']} "
                                  f"but the cluster is {cluster_id}")
            if "directory.id" in props and (cluster_id and "cluster.id" in props):
                return props
            props.setdefault("directory.id", new_id())
            if cluster_id:
                props["cluster.id"] = cluster_id
        else:
            props = {"version": "0", "broker.id": str(broker_id),
                     "directory.id": new_id()}
            if cluster_id:
                props["cluster.id"] = cluster_id
        written = time.gmtime(None if clock_ms is None else clock_ms() / 1000)
        body = "#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", written) + "\n"
        body += "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
        fileops.write_file_atomically(path, body.encode())
        return props
    except OSError as e:
        raise LogDirError(log_dir, cause=e, detail=f"{path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise LogDirError(log_dir, detail=f"{path} is not text") from e
