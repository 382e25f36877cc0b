"""What machine are we on? CPU facts from /proc and /sys; GPU facts from NVML and torch.

`detect_cpu` needs no torch. `detect_cuda` imports torch and (if installed) `pynvml` from
nvidia-ml-py lazily; every NVML call is guarded because vGPU, MIG and WSL often refuse some.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from ..errors import InvalidInputError
from ..spec.catalog import hardware_catalog, normalise
from .results import DeviceInfo

#: FLOPs per cycle per core by SIMD extension, assuming two FMA pipes per core (Zen 3/4,
#: Intel server cores): 256-bit FMA = 8 fp32 lanes x 2 FLOPs x 2 pipes = 32; 512-bit = 64.
#: AMX tiles: 1024 bf16/fp16 FLOPs per cycle per core (Intel Sapphire Rapids optimisation
#: manual figure); AVX512-BF16 dot products: 128. Without any, bf16 is emulated.
_FP32_FLOPS_PER_CYCLE = (("avx512f", 64), ("avx2", 32), ("avx", 16), ("sse2", 8))
_HALF_FLOPS_PER_CYCLE = {
    "bf16": (("amx_bf16", 1024), ("avx512_bf16", 128)),
    "fp16": (("amx_fp16", 1024), ("avx512_fp16", 128)),
}
_SIMD_FLAGS = (
    "sse2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "amx_int8",
)


def cpu_threads() -> int:
    """Cores this process may run on (cgroup/affinity aware), the thread count used."""
    return len(os.sched_getaffinity(0))


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    for suffix, factor in (("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if text.endswith(suffix):
            return int(text[:-1]) * factor
    return int(text)


def _cpu_caches() -> dict[str, int]:
    """Data/unified cache size per level as seen by cpu0, e.g. {'L1d': 32768, 'L3': ...}."""
    caches: dict[str, int] = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (d / "level").read_text().strip()
            kind = (d / "type").read_text().strip()
            size = _size_bytes((d / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind != "Instruction":
            caches[f"L{level}{'d' if kind == 'Data' else ''}"] = size
    return caches


def _cpu_clock_mhz(info: dict[str, str]) -> tuple[float | None, str]:
    """The clock the CPU peak is derived from, and where it comes from; None where no
    positive clock is reported (some VMs show 'cpu MHz: 0.000')."""
    try:
        khz = float(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        if khz > 0:
            return khz / 1e3, "max clock from cpufreq"
    except (OSError, ValueError):
        pass
    try:
        mhz = float(info.get("cpu MHz", "nan"))
    except ValueError:
        mhz = float("nan")
    if mhz > 0 and mhz != float("inf"):
        return mhz, (
            "clock = current 'cpu MHz' of /proc/cpuinfo (no cpufreq max exposed; turbo unknown)"
        )
    return None, "clock unknown"


def cpu_flops_per_cycle(flags: set[str]) -> dict[str, int]:
    """Dense FLOPs per cycle per core for each dtype this CPU computes natively."""
    out = {}
    for flag, per_cycle in _FP32_FLOPS_PER_CYCLE:
        if flag in flags and (flag != "avx2" or "fma" in flags):
            out["fp32"] = per_cycle
            break
    for dtype, options in _HALF_FLOPS_PER_CYCLE.items():
        for flag, per_cycle in options:
            if flag in flags:
                out[dtype] = per_cycle
                break
    return out


def detect_cpu(threads: int | None = None) -> DeviceInfo:
    """This CPU, to be measured with `threads` intra-op threads (default: every core this
    process may use); the datasheet peak is for that many cores."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    if threads is not None and not 1 <= threads <= cpu_threads():
        raise InvalidInputError(
            f"`threads` must be between 1 and {cpu_threads()} (the cores "
            f"this process may use), got {threads}"
        )
    threads = threads or cpu_threads()
    clock_mhz, clock_note = _cpu_clock_mhz(info)
    per_cycle = cpu_flops_per_cycle(flags)
    peaks = {d: threads * clock_mhz * 1e6 * f for d, f in per_cycle.items()} if clock_mhz else {}
    name = info.get("model name") or platform.processor() or "unknown CPU"
    family = (
        f" (family {info['cpu family']}, model {info['model']})" if "cpu family" in info else ""
    )
    return DeviceInfo(
        kind="cpu",
        name=name + family,
        catalog_note="no catalog spec for CPUs; the datasheet spec is derived from detection",
        memory_bytes=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        cores=os.cpu_count(),
        threads_used=threads,
        clock_mhz=clock_mhz,
        caches_bytes=_cpu_caches(),
        simd_flags=tuple(f for f in _SIMD_FLAGS if f in flags),
        flops_per_cycle_per_core=per_cycle,
        native_dtypes=tuple(per_cycle),
        datasheet_peak_flops_per_s=peaks,
        datasheet_note=(
            f"peak = {threads} cores x clock x FLOPs/cycle from SIMD flags (two FMA "
            f"pipes assumed); {clock_note}; DRAM bandwidth not detectable from "
            "inside this machine: unknown"
        ),
    )


def match_catalog(device_name: str) -> tuple[str | None, str]:
    """The catalog spec whose name or alias matches `device_name`: exact (normalised), else
    the longest name/alias contained in it. Returns (name or None, how it matched)."""
    target = normalise(device_name)
    keys = {normalise(k): e.name for e in hardware_catalog().entries for k in (e.name, *e.aliases)}
    for candidate in (target, target.removeprefix("nvidia-"), target.removeprefix("amd-")):
        if candidate in keys:
            return keys[candidate], f"'{device_name}' matches catalog spec '{keys[candidate]}'"
    contained = [k for k in keys if len(k) >= 4 and k in target]
    if contained:
        best = max(contained, key=len)
        return keys[best], (
            f"'{device_name}' contains '{best}' of catalog spec "
            f"'{keys[best]}'; check the variant (SXM/PCIe/NVL)"
        )
    return None, (
        f"no catalog spec matches '{device_name}'; % of peak uses the bandwidth from "
        "NVML, and calibrate writes a spec from the measurements alone"
    )


def _nvml_facts(index: int) -> dict:
    """NVML facts for device `index` (NVML indices ignore CUDA_VISIBLE_DEVICES; the caller
    matches by PCI bus id). Empty when nvidia-ml-py is missing or NVML refuses."""
    try:
        import pynvml
    except ImportError:
        return {}
    facts: dict = {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return {}
    try:
        import torch

        bus_id = getattr(torch.cuda.get_device_properties(index), "pci_bus_id", None)
        h = (
            pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            if isinstance(bus_id, str)
            else pynvml.nvmlDeviceGetHandleByIndex(index)
        )

        def get(key, fn, *args, scale=1.0):
            try:
                value = fn(h, *args)
            except pynvml.NVMLError:
                return
            facts[key] = value * scale if isinstance(value, (int, float)) else value

        get("max_sm_clock_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM)
        get("max_mem_clock_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM)
        get("bus_width_bits", pynvml.nvmlDeviceGetMemoryBusWidth)
        get("power_limit_w", pynvml.nvmlDeviceGetEnforcedPowerLimit, scale=1e-3)
        get("sm_clock_mhz_at_start", pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM)
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            facts["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        except pynvml.NVMLError:
            pass
    except pynvml.NVMLError:
        pass
    finally:
        pynvml.nvmlShutdown()
    if facts.get("max_mem_clock_mhz") and facts.get("bus_width_bits"):
        # double data rate: clock x bus bytes x 2 (HBM and GDDR6 report the DDR clock)
        facts["theoretical_bandwidth_bytes_per_s"] = (
            2 * facts["max_mem_clock_mhz"] * 1e6 * facts["bus_width_bits"] / 8
        )
    return facts


def detect_cuda(index: int) -> DeviceInfo:
    import torch

    if not torch.cuda.is_available():
        raise InvalidInputError(
            f"no CUDA GPU is visible (torch {torch.__version__}); run on the CPU: `device=cpu`"
        )
    if index >= torch.cuda.device_count():
        raise InvalidInputError(
            f"cuda:{index} does not exist; this machine has "
            f"{torch.cuda.device_count()} GPU(s) (cuda:0 ...)"
        )
    props = torch.cuda.get_device_properties(index)
    catalog_name, note = match_catalog(props.name)
    return DeviceInfo(
        kind="cuda",
        name=props.name,
        index=index,
        catalog_name=catalog_name,
        catalog_note=note,
        memory_bytes=float(props.total_memory),
        compute_capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
        **_nvml_facts(index),
    )


def detect(device: str, threads: int | None = None) -> DeviceInfo:
    """`cpu`, `cuda[:N]`, or `auto` (the first GPU if torch sees one, else the CPU).
    `threads` applies to the CPU only."""
    if device == "cpu":
        return detect_cpu(threads)
    if device == "auto":
        import torch

        return detect_cuda(0) if torch.cuda.is_available() else detect_cpu(threads)
    if device == "cuda" or device.startswith("cuda:"):
        index_text = device.partition(":")[2] or "0"
        if not index_text.isdigit():
            raise InvalidInputError(f"bad device '{device}'; use auto, cpu, or cuda:N")
        return detect_cuda(int(index_text))
    raise InvalidInputError(f"unknown device '{device}'; use auto, cpu, or cuda:N")
