"""How long something takes, as the consoles say it (training's ETA, a sweep's trials)."""


def clock(seconds: float) -> str:
    """1h02m, 4m05s, 37s."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
