"""How busy other processes kept this machine while `check` measured: a competing load.

On Linux, /proc/stat counts the CPU time every process on the machine spent (user, nice,
system, irq, softirq) and the time the hypervisor gave this VM's CPUs to another guest
(steal), in clock ticks; this process's own CPU time comes from `os.times`. Their difference
over the wall time is the number of cores something else kept busy: one core for a process
spinning in a loop, a fraction for a neighbour VM taking turns. Elsewhere (no /proc/stat)
nothing is measured and nothing is said.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
#: Fields of the aggregate `cpu` line that count busy time: user, nice, system, (idle,
#: iowait skipped), irq, softirq, steal. guest and guest_nice are already inside user and
#: nice (proc(5)), so they are not added again.
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
#: Cores another process must keep busy, on average, for a miss to count as measured under a
#: competing load: half a core is a neighbour taking a core half the time, which on this
#: 2-core VM moved single decode steps by up to 27% (docs/measurement.md).
COMPETING_CORES = 0.5


def machine_busy_s(text: str, ticks_per_s: float) -> float | None:
    """Busy CPU seconds of the whole machine since boot, from /proc/stat's `cpu` line."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                ticks = [int(fields[1 + i]) for i in BUSY_FIELDS if 1 + i < len(fields)]
            except ValueError:
                return None
            return sum(ticks) / ticks_per_s
    return None


def _read_machine_busy_s() -> float | None:
    try:
        return machine_busy_s(PROC_STAT.read_text(), float(os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError):
        return None


def own_cpu_s() -> float:
    """CPU seconds this process (all its threads) and its waited-for children have spent."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class LoadMeter:
    """Started before measuring; `other_cores` after: cores other processes kept busy."""

    machine_s: float | None
    own_s: float
    wall_s: float
    read_machine: Callable[[], float | None] = _read_machine_busy_s
    read_own: Callable[[], float] = own_cpu_s
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def start(
        cls,
        read_machine: Callable[[], float | None] = _read_machine_busy_s,
        read_own: Callable[[], float] = own_cpu_s,
        clock: Callable[[], float] = time.monotonic,
    ) -> LoadMeter:
        return cls(read_machine(), read_own(), clock(), read_machine, read_own, clock)

    def other_cores(self) -> float | None:
        """(Δ machine busy − Δ own CPU) / Δ wall since `start`, at least 0; None where the
        machine's busy time cannot be read."""
        machine, own, wall = self.read_machine(), self.read_own(), self.clock()
        if machine is None or self.machine_s is None or wall <= self.wall_s:
            return None
        return max((machine - self.machine_s - (own - self.own_s)) / (wall - self.wall_s), 0.0)
