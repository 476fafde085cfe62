"""The governor of the claude-code backend's runs in flight, on fake machine readings: it grows
while the CPU has room and runs wait, shrinks when the CPU is saturated, never holds more CLI
processes than memory does; and the lanes give one to the claude-code backend only, unless
``--trigger-concurrency`` fixes the number."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.base import Answer
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.lanes import FIXED_BY_OPTION
from pytest_skilltrigger.engine.load_governor import (
    MB,
    Bounds,
    Load,
    LoadGovernor,
    LoadReport,
    Policy,
    Readings,
    next_limit,
    side_by_side,
)
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.engine.share import ProcessShare
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.reports.terminal import load_header_line, load_summary_line
from pytest_skilltrigger.support.machine import CpuMeter, available_memory, cpu_count, peak_rss
from tests.engine.test_concurrency import holders, settle
from tests.engine.test_sampler import ScriptedBackend

PEAK = 200 * MB
PLENTY = 64_000 * MB


class Machine:
    """Fake readings a test sets: the CPU busy, the memory available, a process's peak."""

    def __init__(self, cpu: float | None = 0.3, available: int | None = PLENTY) -> None:
        self.cpu = cpu
        self.available = available
        self.peak: int | None = PEAK

    def readings(self) -> Readings:
        return Readings(lambda: self.cpu, lambda: self.available, lambda: self.peak)


def governor_of(
    machine: Machine, start: int = 2, cap: int = 8, parts: int = 1
) -> tuple[LoadGovernor, Concurrency]:
    concurrency = Concurrency(start, most=cap)
    governor = LoadGovernor(concurrency, Bounds(start, cap, parts), machine.readings())
    return governor, concurrency


def run_ticks(governor: LoadGovernor, count: int, runs: int) -> list[int]:
    """Ticks with ``runs`` runs asking for a slot all along."""
    concurrency = governor.concurrency
    limits = []
    for _ in range(count):
        limits.append(governor.tick())
        in_flight = min(concurrency.limit, runs)
        settle(concurrency, in_flight=in_flight, waiting=runs - in_flight)
    return limits


def test_it_grows_with_the_room_while_the_cpu_has_it_and_runs_wait() -> None:
    machine = Machine(cpu=0.3)
    governor, concurrency = governor_of(machine)
    with holders(concurrency, 12):
        settle(concurrency, in_flight=2, waiting=10)
        assert run_ticks(governor, 4, runs=12) == [4, 8, 8, 8]  # at most doubling, the cap
        assert concurrency.in_flight == 8
    assert concurrency.peak == 8


def test_near_the_target_it_grows_one_at_a_time() -> None:
    machine = Machine(cpu=0.9)
    governor, concurrency = governor_of(machine, cap=16)
    with holders(concurrency, 12):
        settle(concurrency, in_flight=2, waiting=10)
        limits = run_ticks(governor, 3, runs=12)
        machine.cpu = 0.6  # room for more than half as many again
        limits += run_ticks(governor, 2, runs=12)
    assert limits == [3, 4, 5, 7, 11]


def test_it_grows_only_while_runs_wait_for_a_slot() -> None:
    governor, concurrency = governor_of(Machine(cpu=0.1))
    with holders(concurrency, 4):
        settle(concurrency, in_flight=2, waiting=2)
        assert run_ticks(governor, 4, runs=4) == [4, 4, 4, 4]  # nothing waits past 4


def test_it_shrinks_when_the_cpu_is_saturated_and_never_below_the_start() -> None:
    machine = Machine(cpu=0.2)
    governor, concurrency = governor_of(machine, start=2, cap=16)
    with holders(concurrency, 20):
        settle(concurrency, in_flight=2, waiting=18)
        run_ticks(governor, 10, runs=20)
        assert concurrency.limit == 16
        machine.cpu = 1.0  # saturated: a quarter off each tick, at least one
        limits = [governor.tick() for _ in range(8)]
    assert limits == [12, 9, 7, 6, 5, 4, 3, 2]
    assert governor.tick() == 2  # the start is the floor
    assert (governor.lowest, governor.highest) == (2, 16)


def test_between_the_target_and_saturation_it_holds() -> None:
    machine = Machine(cpu=0.1)
    governor, concurrency = governor_of(machine)
    with holders(concurrency, 10):
        settle(concurrency, in_flight=2, waiting=8)
        run_ticks(governor, 1, runs=10)
        machine.cpu = 0.97
        assert run_ticks(governor, 3, runs=10) == [4, 4, 4]


def test_without_a_cpu_reading_it_stays_at_the_start() -> None:
    governor, concurrency = governor_of(Machine(cpu=None))
    with holders(concurrency, 6):
        settle(concurrency, in_flight=2, waiting=4)
        assert run_ticks(governor, 3, runs=6) == [2, 2, 2]


def test_it_never_grows_past_what_memory_holds() -> None:
    machine = Machine(cpu=0.1)
    governor, concurrency = governor_of(machine)
    free = 6 * PEAK  # without a CLI process: three quarters of it hold 4 (and a half)

    def available() -> int:  # each process in flight holds its peak
        return free - concurrency.in_flight * PEAK

    governor.readings = Readings(machine.readings().cpu_busy, available, lambda: PEAK)
    with holders(concurrency, 10):
        settle(concurrency, in_flight=2, waiting=8)
        assert governor.memory_holds(concurrency.in_flight) == 4
        assert run_ticks(governor, 4, runs=10) == [4, 4, 4, 4]
        assert governor.memory_holds(concurrency.in_flight) == 4


def test_memory_running_short_cuts_the_limit_at_once_even_below_the_start() -> None:
    machine = Machine(cpu=0.1)
    governor, concurrency = governor_of(machine, start=4, cap=8)
    concurrency.set_limit(8)
    with holders(concurrency, 2):
        settle(concurrency, in_flight=2, waiting=0)
        machine.available = PEAK // 2  # with the two in flight, three quarters hold one
        assert governor.tick() == 1
    machine.available = None  # memory not known: the cap alone bounds it
    assert governor.memory_holds() is None


def test_a_measured_peak_replaces_the_assumed_one() -> None:
    machine = Machine(available=4 * Policy().assumed_peak)
    machine.peak = None
    governor, _ = governor_of(machine)
    assert governor.memory_holds() == 3  # at the assumed peak
    machine.peak = Policy().assumed_peak // 2
    assert governor.memory_holds() == 6


def test_an_xdist_worker_counts_its_part_of_the_free_memory() -> None:
    machine = Machine(available=12 * PEAK)
    alone, _ = governor_of(machine)
    worker, _ = governor_of(machine, parts=4)
    assert (alone.memory_holds(), worker.memory_holds(), worker.memory_holds(1)) == (9, 2, 3)


def test_the_rule_in_one_step() -> None:
    policy = Policy()
    assert next_limit(5, Load(0.5, waiting=1, ceiling=16), 2, policy) == 9  # 5 x 0.95 / 0.5
    assert next_limit(5, Load(0.2, waiting=1, ceiling=16), 2, policy) == 10  # at most double
    assert next_limit(5, Load(0.94, waiting=1, ceiling=16), 2, policy) == 6  # at least one
    assert next_limit(5, Load(0.5, waiting=1, ceiling=8), 2, policy) == 8  # the cap
    assert next_limit(5, Load(0.5, waiting=0, ceiling=8), 2, policy) == 5
    assert next_limit(8, Load(0.5, waiting=3, ceiling=8), 2, policy) == 8
    assert next_limit(8, Load(0.97, waiting=3, ceiling=8), 2, policy) == 8  # holds
    assert next_limit(8, Load(1.0, waiting=3, ceiling=8), 2, policy) == 6
    assert next_limit(8, Load(0.2, waiting=3, ceiling=3), 2, policy) == 3  # memory
    assert next_limit(3, Load(None, waiting=3, ceiling=8), 2, policy) == 3


def test_its_thread_ticks_until_close() -> None:
    machine = Machine(cpu=0.1)
    concurrency = Concurrency(1, most=4)
    governor = LoadGovernor(concurrency, Bounds(1, 4), machine.readings(), Policy(period=0.01))
    with holders(concurrency, 6):
        governor.start()
        deadline = time.monotonic() + 60  # a loaded machine's slow spell, not a timing
        while concurrency.limit < 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        thread = governor._thread
        governor.close()
    assert thread is not None and not thread.is_alive()
    governor.close()  # twice is fine


def test_the_report_says_what_was_chosen_and_what_happened() -> None:
    machine = Machine(cpu=0.1, available=120 * PEAK)
    governor, concurrency = governor_of(machine)
    before = governor.report("claude-code")
    assert load_header_line(before) == (
        "skilltrigger: claude-code: runs in flight start at 2 (the CPU count) and grow while "
        "the CPU has room (up to 8); memory holds about 90 CLI processes (200 MB each)"
    )
    with holders(concurrency, 5):
        settle(concurrency, in_flight=2, waiting=3)
        run_ticks(governor, 3, runs=5)
        time.sleep(0.02)
    after = governor.report("claude-code")
    assert (after.most_in_flight, after.final_limit, after.lowest_limit) == (5, 8, 2)
    assert 1 < after.average_in_flight <= 5
    line = load_summary_line(after)
    assert line.startswith("skilltrigger: claude-code: ")
    assert "runs in flight on average, 5 at most (the limit moved between 2 and 8" in line
    assert line.endswith("a CLI process held at most 200 MB")
    assert after.to_dict()["process_peak_rss_bytes"] == PEAK


# -- the lanes ----------------------------------------------------------------------------------


class CliBackend(ScriptedBackend):
    """A backend whose runs are processes on this machine, as the claude-code backend's are
    (it has their peak memory), whose questions wait for a signal."""

    name = "claude-code"
    process_peak: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()

    def ask(self, prompt: str, model: str | None = None) -> Answer:
        self.answer.wait(5)
        return Answer("ok", Usage(1, 1), 1)


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_the_claude_code_lanes_get_a_governor_and_the_api_lanes_do_not() -> None:
    cli = TriggerSession(Settings(cache_mode="off"), backend=CliBackend())
    api = TriggerSession(Settings(cache_mode="off"), backend=ScriptedBackend())
    try:
        assert cli.lanes is not None and api.lanes is not None
        governor = cli.lanes.default.governor
        assert governor is not None and governor._thread is not None  # it ticks
        concurrency = cli.lanes.default.live.concurrency
        assert concurrency.limit == cpu_count()
        assert concurrency.most == Policy().cap(cpu_count())
        load = cli.lanes.load()
        assert load is not None and load.governed and load.start == cpu_count()
        # the API backend's limit never moves, and it has nothing to report
        assert api.lanes.default.governor is None and api.lanes.load() is None
        assert api.lanes.default.live.concurrency.limit == 10
    finally:
        cli.close()
        api.close()
    assert governor._thread is None  # closing the session stopped it


def test_trigger_concurrency_fixes_the_claude_code_limit() -> None:
    session = TriggerSession(Settings(cache_mode="off", concurrency=3), backend=CliBackend())
    try:
        assert session.lanes is not None
        assert session.lanes.default.governor is None
        assert session.lanes.default.live.concurrency.limit == 3
        load = session.lanes.load()
        assert load is not None and load.fixed_by == FIXED_BY_OPTION
        assert load_header_line(load) == (
            "skilltrigger: claude-code: 3 runs in flight (--trigger-concurrency)"
        )
    finally:
        session.close()


def test_an_xdist_worker_governs_its_share() -> None:
    share = ProcessShare(1, 2)
    session = TriggerSession(Settings(cache_mode="off"), backend=CliBackend(), share=share)
    try:
        assert session.lanes is not None
        governor = session.lanes.default.governor
        assert governor is not None
        cap = Policy().cap(cpu_count())
        assert governor.bounds == Bounds(share.part_of(cpu_count()), share.part_of(cap), 2)
    finally:
        session.close()


def test_a_question_the_cli_answers_takes_a_slot_of_the_runs_in_flight(
    no_credentials: None,
) -> None:
    backend = CliBackend()
    session = TriggerSession(Settings(cache_mode="off", concurrency=1), backend=backend)
    assert session.lanes is not None
    slots = session.lanes.shared_limit
    assert slots is not None and session.asker is not None
    assert session.asker.backend() is backend  # chosen first: it may import the SDK, slowly
    answers: list[str] = []
    askers = [
        threading.Thread(target=lambda: answers.append(session.ask("q")[0]), daemon=True)
        for _ in range(2)
    ]
    try:
        for asker in askers:
            asker.start()
        settle(slots, in_flight=1, waiting=1)  # the second question waits for the first
        backend.answer.set()
        for asker in askers:
            asker.join(5)
        assert answers == ["ok", "ok"] and slots.peak == 1
    finally:
        session.close()


# -- the machine's readings -----------------------------------------------------------------------


def test_the_cpu_meter_reads_the_share_busy_between_two_readings(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 1 1 1\n")
    meter = CpuMeter(stat)
    stat.write_text("cpu  250 0 150 780 120 0 0 0 0 0\n")  # 200 busy of 300
    assert meter() == pytest.approx(2 / 3)
    assert meter.readable


def test_memory_and_a_process_peak_are_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal: 8000 kB\nMemAvailable:  4000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert available_memory(tmp_path, cgroup) == 4000 * 1024
    # a container's limit leaves less: its usage counts without the reclaimable file cache
    (cgroup / "memory.max").write_text(f"{3000 * 1024}\n")
    (cgroup / "memory.current").write_text(f"{1500 * 1024}\n")
    (cgroup / "memory.stat").write_text(f"anon 1\ninactive_file {500 * 1024}\n")
    assert available_memory(tmp_path, cgroup) == 2000 * 1024
    (cgroup / "memory.max").write_text("max\n")
    assert available_memory(tmp_path, cgroup) == 4000 * 1024
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text("Name:\tclaude\nVmHWM:\t  206224 kB\n")
    assert peak_rss(42, tmp_path) == 206224 * 1024
    assert peak_rss(43, tmp_path) is None


def test_the_memory_limit_of_this_process_own_cgroup_counts(tmp_path: Path) -> None:
    """A limit on this process's own cgroup (a systemd slice, cgroup v1's memory hierarchy
    here) or one above it leaves less than the machine has; a path that names a cgroup not
    mounted here (the host's, seen from a container), or climbs with "..", counts the mount
    alone."""
    (tmp_path / "meminfo").write_text("MemAvailable:  8000 kB\n")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "cgroup").write_text("4:memory:/slice/job\n1:cpu:/\n0::/\n")
    mount = tmp_path / "cgroup"
    root, slice_, job = (
        mount / "memory",
        mount / "memory" / "slice",
        mount / "memory" / "slice" / "job",
    )
    for folder, limit, used in ((root, 1 << 62, 0), (slice_, 5000, 1000), (job, 3000, 500)):
        folder.mkdir(parents=True)
        (folder / "memory.limit_in_bytes").write_text(f"{limit * 1024}\n")
        (folder / "memory.usage_in_bytes").write_text(f"{used * 1024}\n")
    assert available_memory(tmp_path, mount) == 2500 * 1024  # the job's own limit
    (slice_ / "memory.usage_in_bytes").write_text(f"{4000 * 1024}\n")
    assert available_memory(tmp_path, mount) == 1000 * 1024  # the slice above it, fuller
    # the host's path, seen from a container: only the mount counts, even where a folder
    # of the container shares the path's first name
    (tmp_path / "self" / "cgroup").write_text("4:memory:/slice/host-job\n")
    assert available_memory(tmp_path, mount) == 8000 * 1024
    (tmp_path / "self" / "cgroup").write_text("4:memory:/../slice\n")
    assert available_memory(tmp_path, mount) == 8000 * 1024


def test_the_workers_reports_add_up_and_cross_as_json() -> None:
    """Under xdist each worker reports its own runs in flight; the controller reads them
    back from JSON and adds them up (the largest process peak stands)."""
    one = LoadReport(
        "claude-code",
        1,
        4,
        memory_holds=9,
        per_process=PEAK,
        process_peak=PEAK,
        average_in_flight=2.5,
        most_in_flight=4,
        lowest_limit=1,
        highest_limit=4,
        final_limit=3,
    )
    other = replace(one, process_peak=PEAK + MB, memory_holds=None, average_in_flight=1.5)
    assert LoadReport.from_dict(one.to_dict()) == one
    both = side_by_side([LoadReport.from_dict(r.to_dict()) for r in (one, other)])
    assert both is not None and both.processes == 2
    assert (both.start, both.cap, both.memory_holds, both.process_peak) == (2, 8, 9, PEAK + MB)
    assert (both.average_in_flight, both.most_in_flight, both.final_limit) == (4.0, 8, 6)
    assert load_summary_line(both).startswith(
        "skilltrigger: claude-code: 4.0 runs in flight on average over 2 workers, 8 at most "
        "(the limit moved between 2 and 8, 6 at the end)"
    )
    assert side_by_side([]) is None
