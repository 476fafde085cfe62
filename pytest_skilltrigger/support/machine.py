"""What the machine has to spare: its CPU use, its available memory and a process's peak
memory, read where the system publishes them (Linux's ``/proc`` and cgroup files).

Why here, as plain functions: the governor of the claude-code backend's runs in flight
decides on these readings, and its tests feed it fake ones instead; each reading says None
where the system does not publish it, and the governor then does without it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

PROC = Path("/proc")
CGROUP = Path("/sys/fs/cgroup")
# the memory files of cgroup v2, then of v1: the hierarchy's folder under the mount (and its
# name in /proc/self/cgroup, "" for v2), the limit, the usage, the statistics and the key
# there of the reclaimable file cache
CGROUP_MEMORY = (
    ("", "memory.max", "memory.current", "memory.stat", "inactive_file"),
    (
        "memory",
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "memory.stat",
        "total_inactive_file",
    ),
)
KIB = 1024


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity, where the system says)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1


class CpuMeter:
    """The share of the machine's CPU time that was busy since the previous reading.

    From ``/proc/stat``'s counters (all processes, every CPU; idle and I/O wait count as
    free). Where there is no ``/proc/stat``, the load average over the CPU count stands in:
    machine-wide too, but averaged over a minute, so it follows late. None: neither is there.
    """

    def __init__(self, stat: Path = PROC / "stat") -> None:
        self._stat = stat
        self._lock = threading.Lock()
        self._last = self._times()

    def _times(self) -> tuple[int, int] | None:
        """(busy, total) CPU time so far, in ticks; None without ``/proc/stat``."""
        try:
            with open(self._stat, encoding="ascii") as file:
                fields = file.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu":
            return None
        values = [int(v) for v in fields[1:9]]  # user .. steal (the guest times are in user)
        idle = values[3] + values[4]  # idle and iowait
        total = sum(values)
        return total - idle, total

    @property
    def readable(self) -> bool:
        """Whether this system publishes its CPU use at all."""
        return self._last is not None or hasattr(os, "getloadavg")

    def __call__(self) -> float | None:
        with self._lock:
            now = self._times()
            last, self._last = self._last, now
        if now is not None and last is not None:
            elapsed = now[1] - last[1]
            return (now[0] - last[0]) / elapsed if elapsed > 0 else None
        return _load_share()


def _load_share() -> float | None:
    """The one-minute load average as a share of the CPUs (at most 1), if the system has it."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return min(1.0, load / cpu_count())


def available_memory(proc: Path = PROC, cgroup: Path = CGROUP) -> int | None:
    """Bytes that new processes can have without swapping: ``MemAvailable`` of
    ``/proc/meminfo``, or less when this process's cgroup, or one above it (a container, a
    systemd slice), has a lower limit. None where neither is published."""
    own = proc / "self" / "cgroup"
    found = [
        v
        for v in (_meminfo_available(proc / "meminfo"), _cgroup_room(cgroup, own))
        if v is not None
    ]
    return min(found) if found else None


def _meminfo_available(path: Path) -> int | None:
    return _kib_field(path, "MemAvailable:")


def _kib_field(path: Path, key: str) -> int | None:
    """The value, in bytes, of the ``key  N kB`` line of a ``/proc`` file (None: no such
    file or line)."""
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            for line in file:
                if line.startswith(key):
                    return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room(mount: Path, own: Path) -> int | None:
    """What the memory limits of this process's cgroup and those above it leave: the least
    of each limit less what is used there, the reclaimable file cache not counted as used.
    None: no limit (or no cgroup files). ``own`` is ``/proc/self/cgroup``, which says where
    in each hierarchy this process is."""
    paths = _own_paths(own)
    rooms = []
    for hierarchy, limit_file, usage_file, stat_file, cache_key in CGROUP_MEMORY:
        for folder in _cgroup_folders(mount / hierarchy, paths.get(hierarchy, "/")):
            limit = _read_int(folder / limit_file)
            usage = _read_int(folder / usage_file)
            if limit is None or usage is None or limit >= 1 << 60:  # 1 << 60: v1's "unlimited"
                continue
            cache = _stat_value(folder / stat_file, cache_key) or 0
            rooms.append(max(0, limit - (usage - cache)))
    return min(rooms) if rooms else None


def _own_paths(own: Path) -> dict[str, str]:
    """This process's cgroup in each hierarchy, by controller (``""``: cgroup v2's), from
    the ``id:controllers:path`` lines of ``/proc/self/cgroup``; empty where it is not."""
    try:
        lines = own.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        for controller in controllers.split(","):
            paths.setdefault(controller, path or "/")
    return paths


def _cgroup_folders(mount: Path, path: str) -> list[Path]:
    """The folders of the cgroup at ``path`` under ``mount`` and of each above it. When the
    whole path is not there (a container without its own cgroup namespace sees the host's
    path, while its mount is its own cgroup), only the mount: a folder that happens to share
    a name with the host's would not be this process's."""
    if not mount.is_dir():
        return []
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts) or not mount.joinpath(*parts).is_dir():
        return [mount]
    return [mount.joinpath(*parts[:depth]) for depth in range(len(parts) + 1)]


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _stat_value(path: Path, key: str) -> int | None:
    try:
        with open(path, encoding="ascii") as file:
            for line in file:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def peak_rss(pid: int, proc: Path = PROC) -> int | None:
    """The most memory process ``pid`` has held resident so far (``VmHWM``), in bytes; None
    when the system does not say (no ``/proc``, or the process has ended)."""
    return _kib_field(proc / str(pid) / "status", "VmHWM:")


class PeakMemory:
    """The largest peak memory of the processes of one kind (one backend's CLI runs), as
    they end; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._largest: int | None = None

    def record(self, peak: int | None) -> None:
        if peak is None or peak <= 0:
            return
        with self._lock:
            if self._largest is None or peak > self._largest:
                self._largest = peak

    @property
    def largest(self) -> int | None:
        """The largest peak recorded (None: none yet)."""
        return self._largest
