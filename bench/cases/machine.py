"""Where the cases of a run go: the machine's chosen GPUs, or CPU processes standing in for them, with
the memory caps and speed factors that plans are cut under. `pipebench run`, `pipebench train` and the
pytest-benchmark suite each detect it once (`detect_machine`) and hand it to every case, whose Request
it makes (`Machine.request`)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from pipebench.hardware.cpu import cpu_name
from pipebench.base.errors import UserError
from pipebench.request import Request, check_speeds
from pipebench.base.training import Training

__all__ = ["Machine", "detect_machine", "check_speed_probe", "speed_probe_line", "probe_speeds", "CPU_PROCESSES"]

CPU_PROCESSES = 2
"""How many CPU processes stand in for devices where the run names no count (`run --cpu-processes`)."""


@dataclass(frozen=True)
class Machine:
    """Where cases run: chosen GPU ids (None: CPU processes standing in for `devices` GPUs). Frozen and
    checked when made (a cap or speed per device, each positive): a change is a new Machine (`with_`)."""

    gpus: list[int] | None
    devices: int
    name: str
    """Device name, e.g. "NVIDIA H200" or the CPU's."""
    caps: list[int] | None = None
    """Memory a case may use per GPU, which plans are cut under and predictions judged by (what was free
    when the run started less a margin, or --max-memory; at most gpu_memory); None: no cap."""
    gpu_memory: int | None = None
    """Bytes every worker may allocate per GPU (`--gpu-memory`), enforced in the workers; None: no cap."""
    speeds: list[float] | None = None
    """Speed factor per GPU that plans are cut for (`--speeds`: a busy GPU gets fewer layers); None: equal."""

    def __post_init__(self):
        from pipebench.base.text.parse import count_of

        count_of(self.devices, "devices")
        for name in ("gpus", "caps", "speeds"):
            value = getattr(self, name)
            if value is None:
                continue
            value = list(value)
            if name != "gpus" and len(value) != self.devices:
                raise UserError(f"{name} names {len(value)} device(s) for a machine of {self.devices}")
            object.__setattr__(self, name, value)
        if self.caps is not None:
            for cap in self.caps:
                count_of(cap, "a memory cap", low=0)
        if self.gpu_memory is not None:
            count_of(self.gpu_memory, "gpu_memory")
        if self.speeds is not None:
            check_speeds(self.speeds)

    def with_(self, **changes) -> "Machine":
        """A copy with some fields changed (checked again)."""
        return replace(self, **changes)

    @property
    def device_type(self) -> str:
        return "cpu" if self.gpus is None else "cuda"

    @property
    def device_names(self) -> list[str]:
        """"cuda:0", "cuda:1", ... (after CUDA_VISIBLE_DEVICES), or "cpu" once per CPU stand-in."""
        return [f"cuda:{i}" for i in range(self.devices)] if self.gpus is not None else ["cpu"] * self.devices

    def request(self, training: Training = Training(), caps: Sequence[int] | None | str = "machine") -> Request:
        """What a case on this machine asks of its plans and predictions: every device, their memory caps
        (the machine's unless `caps` says otherwise: None for none), their speeds, `training`."""
        caps = self.caps if caps == "machine" else caps
        return Request.from_keywords(None, {"devices": self.device_names, "max_memory": tuple(caps) if caps else None,
                                            "speeds": tuple(self.speeds) if self.speeds else None,
                                            "training": training})

    @property
    def hardware(self) -> str:
        return f"{self.devices}x{self.name}" if self.gpus is not None else f"cpu{self.devices}proc"

    @property
    def gpus_label(self) -> str:
        return "cpu" if self.gpus is None else ",".join(map(str, self.gpus))


def detect_machine(gpus: list[int] | None, cpu_processes: int | None = None, *, cpu: bool = False) -> Machine:
    """The chosen GPUs (all visible ones when `gpus` is None), or `cpu_processes` CPU processes (None: CPU_PROCESSES)
    when there is none or `cpu` asks for them. Refused, in one line each, before any GPU is looked at: GPU ids
    with `cpu` (`--device cpu --gpus`), and a count of CPU processes with GPU ids (`--cpu-processes N --gpus`)
    or where GPUs are visible and `cpu` does not ask for them (`run --cpu-processes N` without --device cpu):
    the one home of these rules, for run, train and the API alike.

    Counts and names GPUs through torch in this process, which starts the CUDA driver but no context;
    the cases themselves run in children with CUDA_VISIBLE_DEVICES set."""
    import torch

    from pipebench.base.errors import DeviceError
    from pipebench.hardware.devices import check_gpus

    if cpu and gpus is not None:
        raise UserError("--device cpu runs CPU processes: leave out --gpus")
    if cpu_processes is not None and gpus is not None:
        raise UserError("--cpu-processes is for the CPU: with --gpus, the GPUs named are the devices")
    count = 0 if cpu else torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        if gpus is not None:
            raise DeviceError("no CUDA GPU is visible here; leave out --gpus to run on the CPU")
        return Machine(None, cpu_processes or CPU_PROCESSES, cpu_name())
    if cpu_processes is not None:
        raise UserError("--cpu-processes is for the CPU: add --device cpu to run on the CPU here, or name the GPUs "
                        "with --gpus")
    chosen = list(range(count)) if gpus is None else gpus
    check_gpus(chosen)  # names a GPU that does not exist
    from pipebench.hardware.gpus import free_memory_caps, query_gpus

    infos = {g.index: g for g in query_gpus()}
    caps = free_memory_caps([infos[i] for i in chosen]) if all(i in infos for i in chosen) else None
    return Machine(chosen, len(chosen), torch.cuda.get_device_name(chosen[0]), caps)


def check_speed_probe(on_gpu: bool) -> None:
    """Refuse `--speeds auto` (the API's speeds="auto") off the GPUs: the probe times GPUs. The one home of
    this line, for plan, advise and run alike."""
    if not on_gpu:
        raise UserError("--speeds auto probes GPUs; on the CPU give the factors, e.g. --speeds 1,0.5")


def speed_probe_line(labels: Iterable[str], factors: Sequence[float]) -> str:
    """The line a speed probe says: each device (`labels`) with its factor, as plan, advise and run say it."""
    return "speed probe: " + ", ".join(f"{label} {factor:.2f}" for label, factor in zip(labels, factors))


def probe_speeds(machine: Machine) -> list[float]:
    """Speed factor per chosen GPU (hardware.gpu_probes.measure_speeds), probed in a child process so that
    this one never initialises CUDA."""
    from pipebench.bench.launch.spawn import WorkerError, call_in_child
    from pipebench.base.errors import DeviceError

    try:
        return call_in_child(_probe_speeds, gpus=machine.gpus)
    except WorkerError as exc:
        raise DeviceError(f"the GPU speed probe failed: {exc}") from None


def _probe_speeds() -> list[float]:
    import torch

    from pipebench.hardware.gpu_probes import measure_speeds

    return measure_speeds([f"cuda:{i}" for i in range(torch.cuda.device_count())])
