"""Timing as docs/benchmarks.md prescribes: warm-up calls first (module
loads, cuDNN plan builds and torch.compile stay out of the numbers), then one
CUDA event pair around each call, synchronized, so every sample is the device
time of one call; median, min and max.

Before each timed call the GPU is given a short spin (torch.cuda._sleep), so
the host's Python, dispatch and autograd overhead of the call is spent while
the GPU is still busy: the events then time the kernels, as they run inside a
model where launches run ahead of the GPU, and as dash-bench's C++ loop (a
few microseconds of host time) times them. A repetition where the GPU still ran
dry before the call had been launched is counted in host_bound_reps.

On a CPU device (a smoke run of the scripts' logic, not a measurement) a host
clock replaces the events."""
import statistics
import time

import torch


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


# About 1-2 ms at an H200's 1.5-2 GHz: longer than the host needs to launch
# one attention call or its autograd backward.
SPIN_CYCLES = 2_000_000


# Idle seconds before a pass's timed calls on a GPU (time_calls says why):
# 0.5 s made the two modes' forwards of one peers run (the same kernel) agree
# within 0.4% for every peer (was up to 8% for dash_attn, 15% for FA4), for
# ~200 s more per full peers run.
SETTLE_S = 0.5


def settle_seconds(device, settle_s=None):
    """The idle time_calls applies before its timed calls: settle_s when
    given, else SETTLE_S on a GPU and 0 on a CPU."""
    if settle_s is not None:
        return settle_s
    return SETTLE_S if torch.device(device).type == "cuda" else 0.0


def time_calls(fn, reps, warmup=3, device="cuda", settle_s=None):
    """Returns {median_ms, min_ms, max_ms, warmup_s, host_bound_reps};
    warmup_s is the wall time of the warm-up calls (for torch.compile:
    mostly compilation). settle_seconds(device, settle_s): the GPU idles
    that long after the warm-up, so that what ran before (another
    implementation's backward) does not set the clock of these samples.
    H200, 2026-12-04: during seconds of backwards the board sits at its
    700 W limit with the SM clock at 1.4-1.7 GHz; the clock climbs back to
    1.98 GHz within ~0.2 s. A hdim 128 full 16k forward timed right after
    ran at 600-652 TFLOPS instead of 707 (705-708 from 0.2 s on); a pass's
    15 calls fit inside that window, so one kernel read up to 8% (FA4's up
    to 15%) apart in the two modes of one peers run."""
    began = time.perf_counter()
    for _ in range(warmup):
        fn()
    synchronize(device)
    warmup_s = time.perf_counter() - began
    on_cuda = torch.device(device).type == "cuda"
    time.sleep(settle_seconds(device, settle_s))
    samples, host_bound = [], 0
    for _ in range(reps):
        if on_cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SPIN_CYCLES)
            start.record()
            fn()
            host_bound += bool(start.query())  # the spin ended before the call was launched
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
        else:
            start = time.perf_counter()
            fn()
            samples.append(1e3 * (time.perf_counter() - start))
    return dict(median_ms=statistics.median(samples), min_ms=min(samples), max_ms=max(samples), warmup_s=warmup_s,
                host_bound_reps=host_bound if on_cuda else None)


def bitwise_diff(a, b):
    """(bitwise equal, max |a - b|) of two tensors. Bits are compared as
    integers of the element's width, so NaN == NaN and -0 != +0, as a rerun
    check should."""
    integer = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    if torch.equal(a.view(integer), b.view(integer)):
        return True, 0.0
    return False, (a.double() - b.double()).abs().max().item()
