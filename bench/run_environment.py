"""What a result file records about where it was measured: device, driver,
torch/CUDA/cuDNN/Triton versions, the peers' package versions, date, commit."""
import datetime
import importlib.metadata
import pathlib
import platform
import subprocess

import torch


def _command(*args):
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
        return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit():
    """The checkout's short commit, or None (the device gets a copy without
    .git: gpu_run.sh passes --commit there)."""
    return _command("git", "-C", str(pathlib.Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD")


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe(document):
    """One line naming the device, the software (the peer packages found) and
    the commit of a run."""
    peers = [f"{name} {document[key]}" for key, name in (("flash_attn", "flash-attn"), ("flash_attn_3", "FA3"),
                                                          ("flash_attn_4", "flash-attn-4"),
                                                          ("cudnn_frontend", "cudnn-frontend"))
             if document.get(key)]
    return (f"{document['device']}, torch {document['torch']}, CUDA {document['cuda']}, "
            f"cuDNN {document['cudnn']}, " + "".join(f"{p}, " for p in peers) + f"commit {document['commit']}")


def environment(device, commit=None):
    info = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        commit=commit or git_commit() or "unknown",
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        triton=_version("triton"),
        flash_attn=_version("flash_attn"),
        flash_attn_3=_version("flash_attn_3") or _version("flash-attn-3"),
        flash_attn_4=_version("flash-attn-4") or _version("flash_attn_4"),
        cutlass_dsl=_version("nvidia-cutlass-dsl"),
        cudnn_frontend=_version("nvidia-cudnn-frontend"),
        device_type=torch.device(device).type,
    )
    if info["device_type"] == "cuda":
        props = torch.cuda.get_device_properties(device)
        # The first GPU's line: the benchmarks run on one GPU of a one-GPU machine.
        smi = _command("nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit", "--format=csv,noheader")
        fields = [f.strip() for f in smi.splitlines()[0].split(",")] if smi else []
        info.update(device=props.name, capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                    memory_gib=round(props.total_memory / 2**30, 1),
                    driver=fields[0] if fields else "unknown",
                    max_sm_clock=fields[1] if len(fields) > 1 else None,
                    power_limit=fields[2] if len(fields) > 2 else None)
    else:
        info.update(device=platform.processor() or "cpu", driver=None)
    return info
