"""The model drawn from its resolved config, in the manner of the paper's Figure 1: the encoder on
the left, the decoder on the right, each from its embeddings, to which the positional encoding is
added (⊕), up through its layers to the output projection; around every sub-layer the residual
path into its Add (post-norm: Add & Norm after the sub-layer; pre-norm: the norm before it, the
residual bypassing both), every block with its parameter count and the total in the title.

`layout(spec)` decides what is drawn (boxes, frames and residual paths, testable without
drawing); `draw(layout)` renders it with matplotlib's object API (no pyplot, no global state).
The figure knows no block by name: a block is named by its spec's `figure_name` (the paper's
words for the paper's blocks) or else its registration's `label`, and described by what its spec
says of itself (`table3`, `switches`), so plugin blocks are drawn as aiayn's own. A run of
identical consecutive layers is drawn once, framed with its count ("6×"); a layer that an
override makes different is drawn on its own. An absent part (no positions) is not drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from aiayn.builder.graph import graph_of
from aiayn.builder.model.parts import Registry, described_switches, registry_of
from aiayn.builder.model.size import count_params, embedding_groups, layer_sizes, stack_extras
from aiayn.builder.run.atomic import atomic_write
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

Kind = Literal["io", "embedding", "positional", "sum", "sublayer", "norm", "add", "output", "bias"]
WIDTH_IN = 8.0  # inches; the height follows the deeper stack
DPI = 100  # a PNG is WIDTH_IN * DPI pixels wide
_GAP = 0.22  # between boxes, in drawing units (10 across)


@dataclass
class Box:
    kind: Kind
    lines: list[str]  # the first is the block's name
    color_key: str = ""  # boxes with one key share a colour (a sub-layer's registered type)
    reads_memory: bool = False  # a sub-layer that attends to the encoder's output: an arrow from it
    beside: bool = False  # drawn beside the column, feeding the box after it (the positions into ⊕)
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
    # residual paths (the box whose input the path leaves from, the Add box it joins), indices
    residuals: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Layout:
    title: str
    columns: tuple[Column, ...]  # (encoder, decoder), or (decoder,) of a decoder-only model
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


def _name(spec: Any, registry: Registry) -> str:
    """The paper's words for the paper's blocks, the registration's label for the others."""
    return spec.figure_name or registry.registration(spec).label(spec)


_SWITCH_WORDS = {
    "rotary": lambda v: f"rotary on {v:.0%} of d_k",
    "kv_heads": lambda v: f"{v} K/V heads",
    "qk_norm": lambda v: "QK-norm",
}


def _describe(spec: Any, name: str, registry: Registry) -> str:
    """What a block says of itself: its Table 3 dims, then how it departs from the paper (what
    its name says already left out)."""
    parts = [f"{k}={v}" for k, v in spec.table3.items()]
    for key, value in described_switches(spec, registry).items():
        if value not in (None, False) and str(value).lower() not in name.lower():
            parts.append(_SWITCH_WORDS[key](value) if key in _SWITCH_WORDS else f"{key}={value}")
    return ", ".join(parts)


def _runs(stack: StackSpec) -> list[tuple[int, int]]:
    """(first, last) layer index of each run of identical consecutive layers."""
    runs: list[tuple[int, int]] = []
    for i in range(stack.num_layers):
        same = runs and stack.overrides.get(i, stack.layer) == stack.overrides.get(runs[-1][0], stack.layer)
        runs[-1:] = [(runs[-1][0], i)] if same else [*runs[-1:], (i, i)]
    return runs


def _stack_boxes(column: Column, stack: StackSpec, d_model: int, side: Literal["encoder", "decoder"]) -> None:
    registry = registry_of(stack)
    norm_name = _name(stack.add_norm.norm, registry)
    pre = stack.add_norm.placement == "pre"
    final, bias = stack_extras(stack, d_model, side)
    if stack.position_bias is not None:
        name = registry.registration(stack.position_bias).label(stack.position_bias)
        column.boxes.append(Box("bias", [f"position bias: {name}", "shared by the stack's self-attentions", _n(bias or 0)]))
    for first, last in _runs(stack):
        sublayers = stack.overrides.get(first, stack.layer)
        params, norms = layer_sizes(stack, d_model, side, first)
        start = len(column.boxes)
        for sub, count, norm in zip(sublayers, params, norms):
            enters = len(column.boxes)  # the residual leaves from this box's input
            if pre:
                column.boxes.append(Box("norm", [norm_name, _n(norm)]))
            name = _name(sub, registry)
            lines = [name, _describe(sub, name, registry), _n(count)]
            column.boxes.append(
                Box("sublayer", [line for line in lines if line], color_key=sub.type, reads_memory=sub.reads_memory)
            )
            column.boxes.append(Box("add", ["Add"]) if pre else Box("norm", [f"Add & {norm_name}", _n(norm)]))
            column.residuals.append((enters, len(column.boxes) - 1))
        times = last - first + 1
        label = (
            f"{times}×"
            if (first, last) == (0, stack.num_layers - 1)
            else f"layers {first}-{last} ({times}×)"
            if times > 1
            else f"layer {first}"
        )
        column.frames.append(Frame(start, len(column.boxes) - 1, label))
    if final is not None:
        column.boxes.append(Box("norm", [f"final {norm_name}", _n(final)]))


def layout(spec: ModelSpec, title: str = "") -> Layout:
    """The boxes of each column (the encoder's and the decoder's, or a one-stack model's one, as
    GPT-style and BERT-style figures draw it), bottom-up, placed."""
    groups, positions = embedding_groups(spec)
    positional = _name(spec.positional, registry_of(spec)) if spec.positional.figure_name != "" else None
    last, stack = list(spec.stacks.items())[-1]  # the decoder (an encoder-only model's: its encoder), with the output
    decoder = Column(f"{last.capitalize()} (N={stack.num_layers})")
    encoder = spec.encoder if "source" in graph_of(spec).sides else None  # an encoder column where the graph reads a source
    left = None if encoder is None else Column(f"Encoder (N={encoder.num_layers})")
    notes = []
    ends = [(decoder, "target", "Inputs" if left is None else "Outputs (shifted right)")]
    for column, side, io in ([] if left is None else [(left, "source", "Inputs")]) + ends:
        column.boxes.append(Box("io", [io]))
        sides, count = next((s, n) for s, n in groups if side in s)
        shared = f"shared: {' = '.join(sides)}" if len(sides) > 1 else ""
        lines = [
            f"{'Input' if side == 'source' or left is None else 'Output'} Embedding",
            f"vocab={spec.embedding.vocab_size}, d_model={spec.d_model}",
            shared,
            _n(count),
        ]
        column.boxes.append(Box("embedding", [line for line in lines if line]))
        if positional is not None:  # added to the embeddings, as Figure 1's ⊕
            # a narrow box beside the column: its name in two lines
            column.boxes.append(Box("positional", [*positional.split(" ", 1), _n(positions)], beside=True))
            column.boxes.append(Box("sum", ["⊕"]))
    if left is not None and len(next(s for s, _ in groups if "source" in s)) > 1:
        notes.append("one embedding matrix: " + " = ".join(next(s for s, _ in groups if "source" in s)))
    if left is not None and encoder is not None:
        _stack_boxes(left, encoder, spec.d_model, "encoder")
    _stack_boxes(decoder, stack, spec.d_model, last)  # type: ignore[arg-type]
    with torch.device("meta"):
        extra = [(label, sum(p.numel() for p in module.parameters())) for label, module in graph_of(spec).extra_parameters(spec)]
    decoder.boxes += [Box("output", [*label.split(" (", 1)[:1], _n(count)]) for label, count in extra]  # a head
    output = next((n for s, n in groups if s == ("output",)), 0)
    name = "Linear (tied to the embedding)" if not output else "Linear (output projection)"
    bias = next((n for s, n in groups if s == ("output bias",)), 0)
    decoder.boxes.append(Box("output", [name, f"d_model={spec.d_model} -> vocab={spec.embedding.vocab_size}", _n(output + bias)]))
    decoder.boxes.append(Box("output", ["Softmax"]))
    decoder.boxes.append(Box("io", ["Output Probabilities"]))
    columns = (decoder,) if left is None else (left, decoder)
    drawn = Layout(f"{title or 'model'}: {count_params(spec):,} parameters", columns, notes=notes)
    _place(drawn)
    return drawn


def _height(box: Box) -> float:
    if box.kind in ("io", "sum"):
        return 0.4
    return max(0.42, 0.2 + 0.21 * len(box.lines))


def _place(drawn: Layout) -> None:
    top = 0.0
    for column in drawn.columns:
        y = 0.9  # room for the column title below
        for i, box in enumerate(column.boxes):
            box.height = _height(box)
            if box.beside:  # level with the box it feeds, which comes next
                box.y = y + (_height(column.boxes[i + 1]) - box.height) / 2
                continue
            box.y = y
            y += box.height + _GAP
        for frame in column.frames:
            frame.y0 = column.boxes[frame.first].y - _GAP / 2
            frame.y1 = column.boxes[frame.last].y + column.boxes[frame.last].height + _GAP / 2
        top = max(top, y)
    drawn.height = top + 0.9  # the title above


_COLORS = {"io": "none", "embedding": "#f4c7c3", "positional": "#ffffff", "sum": "#ffffff", "norm": "#f3f0a6", "add": "#f3f0a6",
           "output": "#c6dcf5", "bias": "#e6e6e6"}  # fmt: skip
_PALETTE = [
    "#fbd3a6",
    "#c9e7f6",
    "#d5ecc2",
    "#e3d2f1",
    "#f7c9de",
    "#d9d9d9",
]  # sub-layers, by registered type in order of appearance
_INK = "#444444"
_CENTRES = (3.1, 6.9)  # of the encoder's and the decoder's column, in drawing units (10 across)
_HALF = 1.55  # a box's half width
_FRAME = 1.8  # a frame's half width
_BESIDE = 0.6  # the half width of a box beside a column, centred in the margin outside its frame


def draw(drawn: Layout) -> Any:
    """A matplotlib Figure of the layout, WIDTH_IN inches wide."""
    from matplotlib.figure import Figure

    scale = WIDTH_IN / 10.0  # 10 drawing units across
    fig = Figure(figsize=(WIDTH_IN, max(drawn.height * scale, 3.0)), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, max(drawn.height, 3.0 / scale))
    ax.set_axis_off()
    colors: dict[str, str] = {}
    ax.text(5, drawn.height - 0.45, drawn.title, ha="center", va="center", fontsize=11, weight="bold")
    for x, column in zip(_CENTRES if len(drawn.columns) > 1 else (5.0,), drawn.columns):
        _draw_column(ax, x, column, colors)
    left, decoder = drawn.columns if len(drawn.columns) > 1 else (None, drawn.columns[0])
    top = 0.0 if left is None else left.boxes[-1].y + left.boxes[-1].height
    for box in (b for b in decoder.boxes if b.reads_memory):  # the encoder's output, to each sub-layer that reads it
        ax.annotate(
            "",
            xy=(_CENTRES[1] - _HALF, box.y + box.height / 2),
            xytext=(_CENTRES[0] + _HALF, top),
            arrowprops=dict(arrowstyle="->", lw=0.8, color="#1f4e9c"),
        )
    for k, note in enumerate(drawn.notes):
        ax.text(5, 0.1 + 0.0 * k, note, ha="center", va="bottom", fontsize=7, style="italic")
    return fig


_ARROW = dict(arrowstyle="->", lw=0.7, color=_INK)


def _draw_column(ax: Any, x: float, column: Any, colors: dict[str, str]) -> None:
    """One stack's boxes at centre x, the arrows between them, its frames and residual paths."""
    outward = -1 if x < 5 else 1  # the side away from the other column
    ax.text(x, 0.35, column.title, ha="center", va="center", fontsize=10, weight="bold")
    closing = {f.last: f for f in column.frames}
    chain = [i for i, box in enumerate(column.boxes) if not box.beside]
    for i, box in enumerate(column.boxes):
        if box.kind == "sublayer":
            color = colors.setdefault(box.color_key, _PALETTE[len(colors) % len(_PALETTE)])
        else:
            color = _COLORS[box.kind]
        cx = (_BESIDE + 0.05 if outward < 0 else 10 - _BESIDE - 0.05) if box.beside else x  # beside: in the margin
        _draw_box(ax, x, cx, box, color)
        if box.beside:  # into the ⊕ from the side
            level = column.boxes[i + 1].y + column.boxes[i + 1].height / 2
            ax.annotate("", xy=(x + outward * 0.17, level), xytext=(cx - outward * _BESIDE, level), arrowprops=_ARROW)
        elif chain.index(i) + 1 < len(chain):
            after = column.boxes[chain[chain.index(i) + 1]]
            ax.annotate("", xy=(x, after.y), xytext=(x, box.y + box.height), arrowprops=_ARROW)
        if i in closing:
            _draw_frame(ax, x, outward, closing[i])
    for enters, joins in column.residuals:  # out below the block, along the side, into its Add
        leave = column.boxes[enters].y - _GAP / 2
        join = column.boxes[joins]
        side = x + outward * (_HALF + 0.12)
        ax.plot([x, side, side], [leave, leave, join.y + join.height / 2], color=_INK, lw=0.8)
        ax.annotate(
            "", xy=(x + outward * _HALF, join.y + join.height / 2), xytext=(side, join.y + join.height / 2), arrowprops=_ARROW
        )


def _draw_box(ax: Any, x: float, cx: float, box: Any, color: str) -> None:
    """A block's box at centre cx (a ⊕ at x), its lines of text inside."""
    from matplotlib.patches import Circle, FancyBboxPatch

    if box.kind == "sum":
        ax.add_patch(Circle((x, box.y + box.height / 2), 0.17, facecolor="white", edgecolor=_INK, linewidth=0.9))
        ax.text(x, box.y + box.height / 2, "⊕", ha="center", va="center", fontsize=13)
        return
    half = _BESIDE if box.beside else _HALF
    if box.kind != "io":
        ax.add_patch(
            FancyBboxPatch(
                (cx - half, box.y),
                2 * half,
                box.height,
                boxstyle="round,pad=0,rounding_size=0.08",
                facecolor=color,
                edgecolor=_INK,
                linewidth=0.8,
            )
        )
    step = box.height / (len(box.lines) + 1)
    for k, line in enumerate(box.lines):
        ax.text(
            cx,
            box.y + box.height - step * (k + 1),
            line,
            ha="center",
            va="center",
            fontsize=8.5 if k == 0 or box.beside and k < len(box.lines) - 1 else 7,
            weight="bold" if k == 0 and box.kind == "sublayer" else "normal",
        )


def _draw_frame(ax: Any, x: float, outward: int, frame: Any) -> None:
    """The dashed frame around a run of identical layers, and its count ("6×") beside it."""
    from matplotlib.patches import Rectangle

    ax.add_patch(
        Rectangle(
            (x - _FRAME, frame.y0),
            2 * _FRAME,
            frame.y1 - frame.y0,
            fill=False,
            edgecolor="#666666",
            linewidth=0.9,
            linestyle="--",
        )
    )
    short = len(frame.label) <= 4  # "6×" beside the frame, as the paper's "N×"; longer labels along it
    ax.text(
        x + outward * (_FRAME + 0.2),
        (frame.y0 + frame.y1) / 2,
        frame.label,
        ha="center",
        va="center",
        fontsize=11 if short else 8,
        weight="bold",
        rotation=0 if short else 90,
    )


def save(drawn: Layout, path: Path) -> tuple[int, int]:
    """Write the figure as .svg (text kept as text) or .png, whole or not at all, its folders made
    as needed; returns the PNG's (width, height) in pixels."""
    import matplotlib

    fig = draw(drawn)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "aiayn"}), atomic_write(path) as f:
        fig.savefig(f, format=path.suffix.lstrip(".").lower(), dpi=DPI)
    width, height = fig.get_size_inches() * DPI
    return round(width), round(height)
