"""Real disk faults on one log dir: the dir is a small ext4 image, loop-mounted before the
broker starts.

- ``trigger_error()`` writes to ``/sys/fs/ext4/<dev>/trigger_fs_error``: the kernel records a
  file-system error, and ``errors=remount-ro`` turns the mount read-only, so the broker's next
  write fails with EROFS — what a failing disk does to a Kafka log dir;
- ``fill()`` allocates every free block (the image is made with ``-m 0``: no blocks reserved
  for root, which the broker is here), so appends fail with ENOSPC;
- ``repair()`` (broker stopped) unmounts, runs ``e2fsck -fy`` and mounts again; ``unfill()``
  deletes the filler.

Needs root, mkfs.ext4, e2fsck and loop devices; ``unavailable()`` says which is missing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path

IMAGE_MB = 64
FILLER = ".replog-chaos-filler"


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (loop mounts)"
    for tool in ("mkfs.ext4", "e2fsck", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if not Path("/dev/loop-control").exists():
        return "needs loop devices (/dev/loop-control)"
    return None


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class LoopMountedLogDir:
    def __init__(self, log_dir: str | Path, image: str | Path):
        self.log_dir = Path(log_dir)
        self.image = Path(image)
        self.mounted = False

    def create_and_mount(self) -> None:
        self.image.parent.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(IMAGE_MB << 20)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", str(self.image))
        self.mount()

    def mount(self) -> None:
        _run("mount", "-o", "loop,errors=remount-ro", str(self.image), str(self.log_dir))
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            # A mount still busy (a process holding files) is detached lazily: the loop
            # device goes once the last file closes.
            try:
                _run("umount", str(self.log_dir))
            except subprocess.CalledProcessError:
                _run("umount", "-l", str(self.log_dir))
            self.mounted = False

    def device(self) -> str:
        return os.path.basename(_run("findmnt", "-no", "SOURCE", str(self.log_dir)).strip())

    def trigger_error(self) -> None:
        Path(f"/sys/fs/ext4/{self.device()}/trigger_fs_error").write_text("replog chaos\n")

    def read_only(self) -> bool:
        opts = _run("findmnt", "-no", "OPTIONS", str(self.log_dir)).strip().split(",")
        return "ro" in opts

    def fill(self) -> None:
        st = os.statvfs(self.log_dir)
        free = st.f_bavail * st.f_frsize
        fd = os.open(self.log_dir / FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, free)
            # fallocate stops short of the last blocks (metadata); top up to a real ENOSPC.
            chunk = b"\0" * (64 << 10)
            os.lseek(fd, 0, os.SEEK_END)
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno == errno.ENOSPC:
                        break
                    raise
            with contextlib.suppress(OSError):
                os.fsync(fd)
        finally:
            os.close(fd)

    def unfill(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_dir / FILLER)

    def repair(self) -> None:
        """Broker stopped: unmount, e2fsck, mount again (read-write)."""
        self.unmount()
        # e2fsck exits 1 when it fixed something: that is the point.
        subprocess.run(["e2fsck", "-fy", str(self.image)], capture_output=True, check=False)
        self.mount()
