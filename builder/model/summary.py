"""What `aiayn show` reports: Table 3's columns of an experiment, sizes and costs."""

from typing import Any

from aiayn.builder.graph import Graph, graph_of
from aiayn.builder.model.parts import described_switches, registry_of
from aiayn.builder.model.size import count_params, flops_per_token, frozen_count, memory_estimate, param_table
from aiayn.schemas.experiment import ExperimentSpec

_SUBLAYER_COLUMNS = ("d_ff", "h", "d_k", "d_v")  # what sub-layers say of themselves (SublayerSpec.table3)


def paper_columns(spec: ExperimentSpec) -> dict[str, Any]:
    """Table 3's columns (N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls, positional, train
    steps), then the switches by which the model departs from the paper (norm, ffn, kv_heads,
    rotary, position_bias: each block's `switches`). Where layers differ from each other, the
    first layer's value and "uniform": false."""
    model = spec.model
    subs = []  # every kind of layer once, the first layer's first
    stacks = list(model.stacks.values())
    for stack in stacks:
        subs += [*stack.overrides.get(0, stack.layer), *(s for _, layer, _, _ in stack.groups for s in layer)]
    values: dict[str, list[int]] = {column: [] for column in _SUBLAYER_COLUMNS}
    for sub in subs:
        for column, value in sub.table3.items():
            values.setdefault(column, []).append(value)
    switches: dict[str, Any] = {}  # how the model departs from the paper: the first layer's, then the rest's
    for block in [
        *subs,
        *(stack.add_norm.norm for stack in stacks),
        *(s.position_bias for s in stacks if s.position_bias is not None),
    ]:
        for key, value in described_switches(block, registry_of(model)).items():
            values.setdefault(f"switch:{key}", []).append(value)
            switches.setdefault(key, value)
    first = stacks[0]  # the encoder's, the paper's N; a decoder-only model's decoder
    drops = {model.dropout, *(stack.add_norm.dropout for stack in stacks)}
    columns: dict[str, Any] = {
        "N": first.num_layers,
        "d_model": model.d_model,
        **{column: values[column][0] if values[column] else None for column in _SUBLAYER_COLUMNS},
        "P_drop": first.add_norm.dropout,
        "eps_ls": spec.train.label_smoothing,
        "positional": model.positional.type,
        "train_steps": spec.trainer.max_steps,
        **switches,
        **model.graph.table3,  # the graph's columns (none for the paper's)
    }
    uniform = (
        len({stack.num_layers for stack in stacks}) == 1
        and all(len(set(found)) <= 1 for found in values.values())
        and len(drops) == 1
    )
    if not uniform:
        columns["uniform"] = False
    return columns


def identity(spec: ExperimentSpec) -> dict[str, Any]:
    """Who an experiment is: its name, exact parameter count, Table 3 columns and the paper's numbers."""
    return {
        "name": spec.name,
        "params": count_params(spec.model),
        "paper": paper_columns(spec),
        "reported": spec.reported.model_dump() if spec.reported else None,
    }


def summary(spec: ExperimentSpec) -> dict[str, Any]:
    """The object `aiayn show --json` prints (with train.freeze: its trainable and frozen counts)."""
    length = spec.data.max_len
    tokens = spec.train.max_tokens_per_batch or spec.train.tokens_per_step
    who = identity(spec)
    frozen = frozen_count(spec.model, spec.train.freeze) if spec.train.freeze else None
    return {
        **who,
        **({"trainable": who["params"] - frozen, "frozen": frozen} if frozen is not None else {}),
        "tokenizer": tokenizer_layout(spec),
        "blocks": [
            {"block": name, "params_each": each, "count": n, "params": each * n} for name, each, n in param_table(spec.model)
        ],
        "flops_per_token": {"length": length, "forward": round(flops_per_token(spec.model, length))},
        "memory_bytes": {"tokens_per_batch": tokens, **memory_estimate(spec.model, tokens)},
    }


def tokenizer_layout(spec: ExperimentSpec) -> str:
    """How the experiment's text becomes ids, in words: the kind, and joint or a tokenizer a side
    over one vocabulary or over one each."""
    if spec.init_from is not None and spec.init_from.tokenizer == "source":
        return f"init_from's: the tokenizer(s) and vocabulary of {spec.init_from.path}"
    return graph_of(spec).tokenizer_layout(spec) or spec.data.tokenizer.layout(spec.model.embedding.shared_vocab)


def render(info: dict[str, Any], graph: Graph) -> str:
    """The human-readable table `aiayn show` prints under the resolved config; `graph` says what its FLOPs are per."""
    width = max(len(b["block"]) for b in info["blocks"]) + 2
    lines = [f"{'block':<{width}}{'params':>14}{'x':>5}{'total':>14}"]
    for b in info["blocks"]:
        lines.append(f"{b['block']:<{width}}{b['params_each']:>14,}{b['count']:>5}{b['params']:>14,}")
    lines.append(f"{'total':<{width}}{'':>14}{'':>5}{info['params']:>14,}")
    if "frozen" in info:
        lines.append(f"{'trainable':<{width}}{'':>14}{'':>5}{info['trainable']:>14,}")
        lines.append(f"{'frozen (train.freeze)':<{width}}{'':>14}{'':>5}{info['frozen']:>14,}")
    paper = info["paper"]
    lines.append("")
    lines.append(f"tokenizer: {info['tokenizer']}")
    lines.append("Table 3 columns: " + ", ".join(f"{k}={v}" for k, v in paper.items()))
    flops = info["flops_per_token"]
    lines.append(f"forward FLOPs per {graph.flops_basis(flops['length'])}: {flops['forward'] / 1e6:,.1f} M")
    mem = info["memory_bytes"]
    gib = {k: v / 2**30 for k, v in mem.items() if k != "tokens_per_batch"}
    lines.append(
        f"training memory estimate (fp32 + Adam, {mem['tokens_per_batch']:,} tokens per batch): "
        f"{gib['total']:.2f} GiB = weights {gib['weights']:.2f} + gradients {gib['gradients']:.2f} "
        f"+ Adam {gib['optimizer']:.2f} + activations {gib['activations']:.2f}"
    )
    if info.get("reported"):
        r = info["reported"]
        lines.append(f"reported ({r['source']}): PPL {r['ppl']}, BLEU {r['bleu']}, params {r['params_m']}M")
    return "\n".join(lines)
