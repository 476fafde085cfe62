"""Issue 6's load check: a 5,000-entry eval set against the local fake API.

The run writes its runs to a store (``--trigger-store``) and a JSON report, as a real run would.
A tiny plugin in the generated project's ``conftest.py`` records, inside the pytest process:

* at session start: open file descriptors (``/proc/self/fd``), live threads, RSS;
* every 500 items: the same, so memory growth over the run is visible;
* at unconfigure (after the plugin closed its session, allowing up to 2 s for worker threads
  to wind down): the same plus the peak RSS (``VmHWM``), and the descriptors again after a
  ``gc.collect()`` (a leak is what even that does not give back; what only it frees lingers).

It prints peak RSS, RSS growth per 1,000 items after the first 1,000 (bounded memory means
roughly flat), file descriptors and threads at start versus end (a leak shows as more at the
end), and whether the run completed with every item passed.

``--quick``: 1,000 entries.
"""

from __future__ import annotations

import json
import sys

from _common import (
    bench_parser,
    check,
    emit,
    make_entries,
    run_pytest,
    scripted_project,
    skill_args,
    target_row,
)

PROBE = '''"""Load probe: this pytest process's resources at start, along the run, at the end."""
import json
import os
import threading
import time

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.json")
EVERY = 500
_data = {"samples": []}
_count = [0]


def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _sample(label):
    return {
        "label": label,
        "items": _count[0],
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "os_threads": len(os.listdir("/proc/self/task")),
        "rss_kb": _status("VmRSS"),
    }


def pytest_sessionstart(session):
    _data["start"] = _sample("start")


def pytest_runtest_logfinish(nodeid, location):
    _count[0] += 1
    if _count[0] % EVERY == 0:
        _data["samples"].append(_sample("items"))


def pytest_unconfigure(config):
    _data["finish_immediate"] = _sample("finish-immediate")
    deadline = time.monotonic() + 2.0
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    end = _sample("end")
    end["peak_rss_kb"] = _status("VmHWM")
    end["thread_names"] = sorted(t.name for t in threading.enumerate())
    end["fd_targets"] = sorted(
        os.readlink(os.path.join("/proc/self/fd", fd)) for fd in os.listdir("/proc/self/fd")
        if os.path.exists(os.path.join("/proc/self/fd", fd))
    )
    _data["end"] = end
    import gc

    gc.collect()
    _data["after_gc"] = _sample("after-gc")
    with open(OUT, "w") as f:
        json.dump(_data, f)
'''


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--latency", type=float, default=0.005)
    args = parser.parse_args(argv)
    n = args.entries or (1000 if args.quick else 5000)

    entries = make_entries(n)
    with scripted_project(entries, latency=args.latency, conftest=PROBE) as (tmp, api, skill):
        opts = skill_args(
            skill, cache="use", store=tmp / "store.sqlite", json_path=tmp / "report.json"
        )
        result = run_pytest(opts, tmp, api, timeout=1800)
        check("load run", result)
        probe_path = tmp / "probe.json"
        probe = json.loads(probe_path.read_text()) if probe_path.exists() else None
        report_ok = (tmp / "report.json").exists()

    passed_line = next(
        (ln for ln in reversed(result.output.splitlines()) if " passed" in ln and " in " in ln), ""
    )
    completed = result.returncode == 0 and f"{n} passed" in passed_line and report_ok
    print(f"load: {n} entries, latency {args.latency * 1000:.0f} ms, store + JSON report on")
    print(f"  completed             {completed}  ({passed_line.strip('= ')})")
    print(f"  wall / cpu            {result.wall:.1f} s / {result.cpu:.1f} s, {result.calls} calls")
    if probe is None:
        print("  !! no probe data (the run did not reach unconfigure)")
        emit(
            [
                target_row(
                    "6 load: 5,000 entries complete",
                    0,
                    1,
                    "ok",
                    "no probe data",
                    lower_is_better=False,
                )
            ]
        )
        return 0
    start, end = probe["start"], probe["end"]
    samples = probe["samples"]
    peak_mb = end["peak_rss_kb"] / 1024
    growth = None
    if len(samples) >= 3:
        first = next(s for s in samples if s["items"] >= min(1000, samples[-1]["items"]))
        last = samples[-1]
        if last["items"] > first["items"]:
            growth = (last["rss_kb"] - first["rss_kb"]) / (last["items"] - first["items"])
    print(f"  peak RSS              {peak_mb:.0f} MB (start {start['rss_kb'] / 1024:.0f} MB)")
    print(
        "  RSS along the run     "
        + ", ".join(f"{s['items']}:{s['rss_kb'] / 1024:.0f}MB" for s in samples)
    )
    if growth is not None:
        print(
            f"  RSS growth            {growth:.1f} KB per item after the first 1,000 "
            f"(~{growth * 1000 / 1024:.1f} MB per 1,000 items)"
        )
    imm = probe["finish_immediate"]
    print(
        f"  fds                   start {start['fds']}, end of run {imm['fds']}, "
        f"after wind-down {end['fds']}"
    )
    print(
        f"  threads               start {start['threads']}, end of run {imm['threads']}, "
        f"after wind-down {end['threads']} {end['thread_names']}"
    )
    extra_fds = end["fds"] - start["fds"]
    if extra_fds > 0:
        targets: dict[str, int] = {}
        for target in end["fd_targets"]:
            targets[target.rsplit("/", 1)[-1]] = targets.get(target.rsplit("/", 1)[-1], 0) + 1
        print(f"  fds open at the end   {targets}")
        print(f"  fds after gc.collect  {probe['after_gc']['fds']}")
    after_gc = probe["after_gc"]["fds"]
    # A leak is what even a full garbage collection does not give back; descriptors that
    # only a gc pass frees (objects in reference cycles) are reported apart as "lingering".
    leaked = after_gc > start["fds"] or end["threads"] > start["threads"]
    note = (
        f"peak RSS {peak_mb:.0f} MB; growth "
        f"{'n/a' if growth is None else f'{growth:.1f} KB/item'}; fds {start['fds']}->"
        f"{end['fds']} ({after_gc} after gc); threads {start['threads']}->{end['threads']}"
    )
    row = target_row(f"6 load: {n} entries, no leaks", peak_mb, 1024.0, "MB peak RSS", note)
    row["ok"] = row["ok"] and completed and not leaked
    emit([row])
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
