"""The learning rate of Sec. 5.3, eq. (3)."""


def noam_lr(step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5); step counts from 1."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
