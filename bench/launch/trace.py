"""A measured timeline of one training step: when each stage ran each forward and backward.

torch.distributed.pipelining runs a stage's work through three methods of its PipelineStage; we wrap
them on the instance to note the start and end of each call. On GPUs the marks are CUDA events on the
current stream (what the device did, not when Python asked); on the CPU, wall-clock times. Each process
measures from its own mark at the start of the step, taken right after a barrier, so processes line up
to within the barrier's skew (tens of microseconds on NVLink).
"""
from __future__ import annotations

import time

import torch


class OpTrace:
    """Records (kind, stage, micro-batch, start, end) for the stages of one process while active."""

    def __init__(self, stages, device: torch.device, process: int):
        self.cuda = device.type == "cuda"
        self.process = process
        self.active = False
        self._marks: list[tuple[str, int, int, object, object]] = []
        self._origin = None
        for stage in stages:
            self._wrap(stage, "forward_one_chunk", lambda args, kwargs: "F")
            self._wrap(stage, "backward_one_chunk",
                       lambda args, kwargs: "B" if kwargs.get("full_backward", args[1] if len(args) > 1 else True) else "I")
            self._wrap(stage, "backward_weight_one_chunk", lambda args, kwargs: "W")

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _wrap(self, stage, method: str, kind_of) -> None:
        inner = getattr(stage, method, None)
        if inner is None:
            return

        def traced(chunk, *args, **kwargs):
            if not self.active:
                return inner(chunk, *args, **kwargs)
            start = self._mark()
            try:
                return inner(chunk, *args, **kwargs)
            finally:
                self._marks.append((kind_of(args, kwargs), stage.stage_index, chunk, start, self._mark()))

        setattr(stage, method, traced)

    def begin(self) -> None:
        self._marks = []
        self._origin = self._mark()
        self.active = True

    def end(self) -> list[dict]:
        """The step's operations, in ms from the step's start (call after the device is synchronised)."""
        self.active = False
        if self.cuda:
            torch.cuda.synchronize()
            since = lambda mark: self._origin.elapsed_time(mark)  # noqa: E731
        else:
            since = lambda mark: (mark - self._origin) * 1e3  # noqa: E731
        return [{"stage": stage, "device": self.process, "kind": kind, "micro": micro,
                 "start_ms": since(start), "end_ms": since(end)}
                for kind, stage, micro, start, end in self._marks]
