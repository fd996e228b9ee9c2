"""The device a trained model decodes on, as the CLI's --device and the Python API's `device`
name it: CUDA where present, else the CPU."""

import torch

from aiayn.builder.errors import UserError, described
from aiayn.builder.run.cpu import auto_threads


def resolve_device(name: object, what: str = "device", *, share_cores: bool = False) -> torch.device:
    """`name` (a str, a torch.device, or None for the default) as a device that exists here;
    otherwise a UserError naming `what` (--device, device). `share_cores` (the CLI's): on the
    CPU, torch's threads set to the cores other processes leave free."""
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(name, torch.device):
        device = name
    elif isinstance(name, str):
        try:
            device = torch.device(name)
        except RuntimeError:
            raise UserError(f"{what} {name!r} is not a torch device; use e.g. cpu, cuda or cuda:1") from None
    else:
        raise UserError(f"{what}: expected a device name such as 'cpu' or 'cuda', got {described(name)}")
    cpu = "--device cpu" if what.startswith("--") else f"{what}='cpu'"
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{what} {name}: no CUDA GPU is available here; use {cpu}")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(f"{what} {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"{what} {name}: a model decodes on cpu or cuda here")
    if device.type == "cpu" and share_cores:
        torch.set_num_threads(auto_threads())
    return device
