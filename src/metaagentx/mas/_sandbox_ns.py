"""Namespace setup for the sandbox fork server (stdlib only; loaded by _sandbox_server.py).

`enter_namespaces(needed)` moves the calling process into private mount, network, IPC and UTS
namespaces; remounts every mount read-only; covers /tmp (mode 0711: job directories go there),
/var/tmp and /dev/shm with private tmpfs mounts nobody else can write to; makes the
`needed` paths (the Python installation, the package) reachable for unprivileged job uids; and
mounts a procfs with hidepid=2 over /proc, so a job sees only its own processes.
The host's mounts are untouched: everything happens in the new mount namespace.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
MOUNT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    enc = [None if s is None else s.encode() for s in (src, target, fstype, data or None)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _mountpoints() -> list[tuple[str, int]]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            path = fields[4].encode().decode("unicode_escape")
            flags = sum(MOUNT_FLAGS.get(opt, 0) for opt in fields[5].split(","))
            points.append((path, flags))
    return points


def enter_namespaces(needed: list[str]) -> None:
    """Private mount/net/IPC/UTS namespaces; everything read-only; fresh tmpfs on tmp dirs;
    `needed` paths reachable for other uids; /proc showing each uid only its own processes."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path, flags in _mountpoints():
        try:
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            if path == "/":
                raise
    needed = sorted({os.path.realpath(p) for p in needed if os.path.exists(p)})
    for tmp, mode, flags in (
        ("/tmp", "0711", MS_NOSUID | MS_NODEV),
        ("/var/tmp", "0755", MS_NOSUID | MS_NODEV | MS_NOEXEC),
        ("/dev/shm", "0755", MS_NOSUID | MS_NODEV | MS_NOEXEC),
    ):
        if os.path.isdir(tmp):  # needed paths under it (e.g. a checkout in /tmp) stay visible
            held = _hold([p for p in needed if p.startswith(tmp + "/")])
            size = "1024m" if tmp == "/tmp" else "1m"
            _mount("tmpfs", tmp, "tmpfs", flags, f"mode={mode},size={size}")
            _restore(held)
    _expose(needed)
    # A fresh procfs where each uid sees only its own processes: jobs cannot read other
    # processes' command lines, environments or open files (the server, as root, sees all).
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")


def _hold(paths: list[str]) -> list[tuple[str, int]]:
    """O_PATH descriptors that keep `paths` reachable after something is mounted over them."""
    return [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in paths]


def _restore(held: list[tuple[str, int]]) -> None:
    """Bind each held path back at its own name (read-only), making parent dirs as needed."""
    for path, fd in held:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.mkdir(path, 0o755)
        else:
            open(path, "w").close()
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        os.close(fd)


def _blocked_ancestor(paths: list[str]) -> str | None:
    """The shallowest directory above one of `paths` that other users cannot enter."""
    ancestors = {os.path.dirname(p) for p in paths}
    for path in list(ancestors):
        while path != "/":
            path = os.path.dirname(path)
            ancestors.add(path)
    for path in sorted(ancestors, key=lambda a: (a.count("/"), a)):
        if not os.stat(path).st_mode & 0o001:
            return path
    return None


def _expose(paths: list[str]) -> None:
    """Make `paths` (the Python installation, the package) reachable for the job's uid without
    showing anything else: a directory others cannot enter (e.g. a 0700 home holding the
    interpreter) is covered by a read-only tmpfs that holds only bind mounts of the way on."""
    while (blocked := _blocked_ancestor(paths)) is not None:
        prefix = blocked.rstrip("/") + "/"
        children = sorted({p[len(prefix) :].split("/")[0] for p in paths if p.startswith(prefix)})
        held = _hold([prefix + child for child in children])
        _mount("tmpfs", blocked, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        _restore(held)
        _mount(None, blocked, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
