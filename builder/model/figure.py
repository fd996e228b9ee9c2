"""The model drawn from its resolved config, in the manner of the paper's Figure 1: the encoder on
the left, the decoder on the right, each from its embeddings and positions up through its
layers to the output projection, every block with its parameter count.

`layout(spec)` decides what is drawn (a list of boxes and frames, testable without drawing);
`draw(layout)` renders it with matplotlib's object API (no pyplot, no global state). The figure
knows no block by name: a sub-layer is labelled by its registration (`label`) and described by
what its spec says of itself (`table3`, `switches`), so plugin blocks are drawn as aiayn's own.
A run of identical consecutive layers is drawn once, framed with its count ("6×"); a layer that
an override makes different is drawn on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiayn.builder.model.registry import registration
from aiayn.builder.model.size import embedding_groups, layer_sizes, stack_extras
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

Kind = Literal["io", "embedding", "positional", "sublayer", "norm", "add", "output", "bias"]
WIDTH_IN = 8.0  # inches; the height follows the deeper stack
DPI = 100  # a PNG is WIDTH_IN * DPI pixels wide
_GAP = 0.22  # between boxes, in drawing units (10 across)


@dataclass
class Box:
    kind: Kind
    lines: list[str]  # the first is the block's name
    color_key: str = ""  # boxes with one key share a colour (a sub-layer's registered type)
    reads_memory: bool = False  # a sub-layer that attends to the encoder's output: an arrow from it
    y: float = 0.0  # bottom, filled in by the layout
    height: float = 0.75


@dataclass
class Frame:
    """A run of identical layers: the boxes from `first` to `last` (indices in the column)."""

    first: int
    last: int
    label: str  # "6×", "layers 0-3 (4×)", or "layer 4" for a layer drawn on its own
    y0: float = 0.0
    y1: float = 0.0


@dataclass
class Column:
    title: str
    boxes: list[Box] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)


@dataclass
class Layout:
    title: str
    columns: tuple[Column, Column]
    height: float = 0.0
    notes: list[str] = field(default_factory=list)

    def texts(self) -> list[str]:
        """Every line of text in drawing order: the title, each column's boxes bottom-up with the
        frames' counts after the box that closes them, then the notes."""
        out = [self.title]
        for column in self.columns:
            out.append(column.title)
            closing = {f.last: f.label for f in column.frames}
            for i, box in enumerate(column.boxes):
                out += box.lines
                if i in closing:
                    out.append(closing[i])
        return out + self.notes


def _n(count: int) -> str:
    return f"{count:,} params" if count else "no params"


def _describe(spec: Any) -> str:
    """What a block says of itself: its Table 3 dims, then how it departs from the paper."""
    parts = [f"{k}={v}" for k, v in spec.table3.items()]
    parts += [f"{k}={v}" for k, v in spec.switches.items() if v not in (None, False)]
    return ", ".join(parts)


def _runs(stack: StackSpec) -> list[tuple[int, int]]:
    """(first, last) layer index of each run of identical consecutive layers."""
    runs: list[tuple[int, int]] = []
    for i in range(stack.num_layers):
        same = runs and stack.overrides.get(i, stack.layer) == stack.overrides.get(runs[-1][0], stack.layer)
        runs[-1:] = [(runs[-1][0], i)] if same else [*runs[-1:], (i, i)]
    return runs


def _stack_boxes(column: Column, stack: StackSpec, d_model: int, side: Literal["encoder", "decoder"]) -> None:
    norm_name = registration(stack.add_norm.norm).label(stack.add_norm.norm)
    pre = stack.add_norm.placement == "pre"
    final, bias = stack_extras(stack, d_model, side)
    if stack.position_bias is not None:
        name = registration(stack.position_bias).label(stack.position_bias)
        column.boxes.append(Box("bias", [f"position bias: {name}", "shared by the stack's self-attentions", _n(bias)]))
    for first, last in _runs(stack):
        sublayers = stack.overrides.get(first, stack.layer)
        params, norms = layer_sizes(stack, d_model, side, first)
        start = len(column.boxes)
        for sub, count, norm in zip(sublayers, params, norms):
            norm_box = Box("norm", [f"{norm_name}" if pre else f"Add & {norm_name}", _n(norm)])
            if pre:
                column.boxes.append(norm_box)
            lines = [registration(sub).label(sub), _describe(sub), _n(count)]
            column.boxes.append(Box("sublayer", [line for line in lines if line], color_key=sub.type, reads_memory=sub.reads_memory))
            column.boxes.append(Box("add", ["Add (residual)"]) if pre else norm_box)
        times = last - first + 1
        label = f"{times}×" if (first, last) == (0, stack.num_layers - 1) else f"layers {first}-{last} ({times}×)" if times > 1 else f"layer {first}"
        column.frames.append(Frame(start, len(column.boxes) - 1, label))
    if final is not None:
        column.boxes.append(Box("norm", [f"final {norm_name}", _n(final)]))


def layout(spec: ModelSpec, title: str = "") -> Layout:
    """The boxes of both columns, bottom-up, placed."""
    groups, positions = embedding_groups(spec)
    pos_name = registration(spec.positional).label(spec.positional)
    encoder, decoder = Column(f"Encoder (N={spec.encoder.num_layers})"), Column(f"Decoder (N={spec.decoder.num_layers})")
    notes = []
    for column, side, io in ((encoder, "source", "Inputs"), (decoder, "target", "Outputs (shifted right)")):
        column.boxes.append(Box("io", [io]))
        sides, count = next((s, n) for s, n in groups if side in s)
        shared = f"shared: {' = '.join(sides)}" if len(sides) > 1 else ""
        lines = [f"{'Input' if side == 'source' else 'Output'} Embedding", f"vocab={spec.embedding.vocab_size}, d_model={spec.d_model}", shared, _n(count)]
        column.boxes.append(Box("embedding", [line for line in lines if line]))
        column.boxes.append(Box("positional", [f"Positional: {pos_name}", _n(positions)]))
    if len(next(s for s, _ in groups if "source" in s)) > 1:
        notes.append("one embedding matrix: " + " = ".join(next(s for s, _ in groups if "source" in s)))
    _stack_boxes(encoder, spec.encoder, spec.d_model, "encoder")
    _stack_boxes(decoder, spec.decoder, spec.d_model, "decoder")
    output = next((n for s, n in groups if s == ("output",)), 0)
    name = "Linear (tied to the embedding)" if not output else "Linear (output projection)"
    bias = next((n for s, n in groups if s == ("output bias",)), 0)
    decoder.boxes.append(Box("output", [name, f"d_model={spec.d_model} -> vocab={spec.embedding.vocab_size}", _n(output + bias)]))
    decoder.boxes.append(Box("output", ["Softmax"]))
    decoder.boxes.append(Box("io", ["Output Probabilities"]))
    drawn = Layout(title or "model", (encoder, decoder), notes=notes)
    _place(drawn)
    return drawn


def _place(drawn: Layout) -> None:
    top = 0.0
    for column in drawn.columns:
        y = 0.9  # room for the column title below
        for box in column.boxes:
            box.height = 0.4 if box.kind == "io" else max(0.42, 0.2 + 0.21 * len(box.lines))
            box.y = y
            y += box.height + _GAP
        for frame in column.frames:
            frame.y0 = column.boxes[frame.first].y - _GAP / 2
            frame.y1 = column.boxes[frame.last].y + column.boxes[frame.last].height + _GAP / 2
        top = max(top, y)
    drawn.height = top + 0.9  # the title above


_COLORS = {"io": "none", "embedding": "#f4c7c3", "positional": "#ffffff", "norm": "#f3f0a6", "add": "#f3f0a6", "output": "#c6dcf5", "bias": "#e6e6e6"}
_PALETTE = ["#fbd3a6", "#c9e7f6", "#d5ecc2", "#e3d2f1", "#f7c9de", "#d9d9d9"]  # sub-layers, by registered type in order of appearance


def draw(drawn: Layout) -> Any:
    """A matplotlib Figure of the layout, WIDTH_IN inches wide."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch, Rectangle

    scale = WIDTH_IN / 10.0  # 10 drawing units across
    fig = Figure(figsize=(WIDTH_IN, max(drawn.height * scale, 3.0)), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, max(drawn.height, 3.0 / scale))
    ax.set_axis_off()
    colors: dict[str, str] = {}
    ax.text(5, drawn.height - 0.45, drawn.title, ha="center", va="center", fontsize=11, weight="bold")
    for x, column in zip((2.6, 7.4), drawn.columns):  # the columns' centres
        ax.text(x, 0.35, column.title, ha="center", va="center", fontsize=10, weight="bold")
        closing = {f.last: f for f in column.frames}
        for i, box in enumerate(column.boxes):
            if box.kind == "sublayer":
                color = colors.setdefault(box.color_key, _PALETTE[len(colors) % len(_PALETTE)])
            else:
                color = _COLORS[box.kind]
            if box.kind != "io":
                ax.add_patch(FancyBboxPatch((x - 1.7, box.y), 3.4, box.height, boxstyle="round,pad=0,rounding_size=0.08", facecolor=color, edgecolor="#444444", linewidth=0.8))
            step = box.height / (len(box.lines) + 1)
            for k, line in enumerate(box.lines):
                ax.text(x, box.y + box.height - step * (k + 1), line, ha="center", va="center", fontsize=8.5 if k == 0 else 7, weight="bold" if k == 0 and box.kind == "sublayer" else "normal")
            if i + 1 < len(column.boxes):
                ax.annotate("", xy=(x, column.boxes[i + 1].y), xytext=(x, box.y + box.height), arrowprops=dict(arrowstyle="->", lw=0.7, color="#444444"))
            if i in closing:
                frame = closing[i]
                ax.add_patch(Rectangle((x - 1.95, frame.y0), 3.9, frame.y1 - frame.y0, fill=False, edgecolor="#666666", linewidth=0.9, linestyle="--"))
                short = len(frame.label) <= 4  # "6×" beside the frame, as the paper's "N×"; longer labels along it
                ax.text(
                    x - 2.05 if x < 5 else x + 2.05, (frame.y0 + frame.y1) / 2, frame.label, ha="center", va="center",
                    fontsize=11 if short else 8, weight="bold", rotation=0 if short else 90,
                )  # fmt: skip
    encoder, decoder = drawn.columns
    top = encoder.boxes[-1].y + encoder.boxes[-1].height
    for box in (b for b in decoder.boxes if b.reads_memory):  # the encoder's output, to each sub-layer that reads it
        ax.annotate("", xy=(7.4 - 1.7, box.y + box.height / 2), xytext=(2.6 + 1.7, top), arrowprops=dict(arrowstyle="->", lw=0.8, color="#1f4e9c"))
    for k, note in enumerate(drawn.notes):
        ax.text(5, 0.1 + 0.0 * k, note, ha="center", va="bottom", fontsize=7, style="italic")
    return fig


def save(drawn: Layout, path: Path) -> tuple[int, int]:
    """Write the figure as .svg (text kept as text) or .png; returns the PNG's (width, height) in pixels."""
    import matplotlib

    fig = draw(drawn)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "aiayn"}):
        fig.savefig(path, format=path.suffix.lstrip(".").lower(), dpi=DPI)
    width, height = fig.get_size_inches() * DPI
    return round(width), round(height)
