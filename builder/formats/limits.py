"""What each target cannot express, refused before any work (and before importing its package),
with a message naming the YAML field to change. Specs say what they are exported as
(`export_as`): a block without a counterpart (a plugin's, say) is refused by name."""

from aiayn.builder.errors import UserError
from aiayn.builder.graph import graph_of
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

CTRANSLATE2 = "CTranslate2"
MARIAN = "Hugging Face Marian"
# the one layer layout each stack may have: the paper's (Figure 1); "ffn": what the target has
LAYOUTS = {"encoder": ("self_attention", "ffn"), "decoder": ("causal_self_attention", "cross_attention", "ffn")}
FFN = ("feed_forward", "gated_feed_forward")
# what a target has, by the specs' export_as: the paper's blocks, and CTranslate2's more
PAPER_HAS = {"ffn": ("feed_forward",), "norm": ("layer_norm",), "positional": ("sinusoidal", "learned")}
CT2_HAS = {"ffn": FFN, "norm": ("layer_norm", "rms_norm"), "positional": ("sinusoidal", "learned", "none")}
# the switches (a sub-layer's departures from the paper, `switches`) a target can hold: an
# allow-list, so that a switch no target knows (a plugin's) is refused by name, never dropped
CT2_SWITCHES = ("ffn", "kv_heads", "rotary")


def check_ctranslate2(spec: ModelSpec) -> None:
    """Refuse, naming the field, what a TransformerSpec cannot hold."""
    _check_encoder_decoder(spec, CTRANSLATE2)
    check_uniform(spec, CTRANSLATE2, has=CT2_HAS, switches=CT2_SWITCHES)
    for side in ("encoder", "decoder"):
        stack = getattr(spec, side)
        attentions = [s for s in stack.layer if s.export_as != FFN[0] and s.export_as != FFN[1]]
        kv = {s.kv_heads or s.h for s in attentions}
        if len(kv) > 1:
            raise UserError(
                f"cannot export to {CTRANSLATE2}: the attention sub-layers of {side}.layer differ in kv_heads {sorted(kv)}; "
                f"{CTRANSLATE2} has one num_heads_kv per stack"
            )
        rotary = attentions[0].rotary
        if rotary is not None and spec.positional.export_as != "none":
            raise UserError(
                f"cannot export to {CTRANSLATE2}: {side}.layer[0].rotary beside positional.type: {spec.positional.type}; "
                f"{CTRANSLATE2} with rotary adds no absolute positions: train with positional: none"
            )
        if stack.add_norm.placement == "post" and stack.has_final_norm:
            raise UserError(
                f"cannot export to {CTRANSLATE2}: {side}.final_norm adds a LayerNorm after a post-norm stack, which "
                f"{CTRANSLATE2} has only for pre-norm (add_norm.placement: pre)"
            )
    eps = {side: getattr(spec, side).add_norm.norm.eps for side in ("encoder", "decoder")}
    if eps["encoder"] != eps["decoder"]:
        raise UserError(
            f"cannot export to {CTRANSLATE2}: encoder.add_norm.norm.eps ({eps['encoder']}) != decoder.add_norm.norm.eps "
            f"({eps['decoder']}); {CTRANSLATE2} has one layer_norm_epsilon"
        )


def check_marian(spec: ModelSpec) -> None:
    """Refuse, naming the field, what a MarianConfig cannot hold: the paper's blocks only."""
    _check_encoder_decoder(spec, MARIAN)
    check_uniform(spec, MARIAN)
    if spec.positional.export_as == "learned":
        raise UserError(
            f"cannot export to {MARIAN}: positional.type: learned; Marian's positions are fixed sinusoids, "
            "so train with positional.type: sinusoidal"
        )
    if not spec.embedding.shared_vocab:
        raise UserError(
            f"cannot export to {MARIAN}: embedding.shared_vocab: false; the exported tokenizers (a "
            "PreTrainedTokenizerFast, or MarianTokenizer's) have one vocabulary, so train with a shared vocabulary (or export --to ctranslate2)"
        )
    for side in ("encoder", "decoder"):
        stack = getattr(spec, side)
        if stack.add_norm.placement == "pre":
            raise UserError(f"cannot export to {MARIAN}: {side}.add_norm.placement: pre; Marian is post-norm only")
        if stack.has_final_norm:
            raise UserError(f"cannot export to {MARIAN}: {side}.final_norm: true; Marian has no final LayerNorm")
        h, d_k = stack_spec_heads(stack)
        if h * d_k != spec.d_model:
            raise UserError(
                f"cannot export to {MARIAN}: {side} attention has d_k ({d_k}) != d_model / h ({spec.d_model} / {h}); "
                "Marian's heads split d_model (export --to ctranslate2 takes any d_k)"
            )


def _check_encoder_decoder(spec: ModelSpec, target: str) -> None:
    graph_of(spec).check_translator_export(spec, target)  # Marian's and CTranslate2's translators hold an encoder-decoder


def check_uniform(
    spec: ModelSpec, target: str, *, has: dict[str, tuple[str, ...]] | None = None, switches: tuple[str, ...] = ()
) -> None:
    """Every layer of a stack alike, in the paper's layout, one head shape per stack, a norm and
    positions the target `has` (default: the paper's), no switch but those it holds; else a
    UserError naming the YAML field that `target` cannot express."""
    has = has or PAPER_HAS
    if spec.positional.export_as not in has["positional"]:
        raise UserError(f"cannot export to {target}: positional.type: {spec.positional.type} has no counterpart in {target}")
    for side in ("encoder", "decoder"):
        _check_stack(getattr(spec, side), side, target, has, switches)


def _check_stack(stack: StackSpec, side: str, target: str, has: dict[str, tuple[str, ...]], switches: tuple[str, ...]) -> None:
    """One stack of check_uniform: its layers alike, each with a counterpart in `target`, in its layout."""
    differing = sorted(i for i, layer in stack.overrides.items() if layer != stack.layer)
    if differing:
        raise UserError(
            f"cannot export to {target}: {side}.overrides makes a heterogeneous stack (layers {differing} differ "
            f"from {side}.layer), and {target} repeats one layer; export a model whose layers are all alike"
        )
    for j, sub in enumerate(stack.layer):
        if sub.export_as is None:
            raise UserError(f"cannot export to {target}: {side}.layer[{j}] is {sub.type}, which has no counterpart in {target}")

    layout = [has["ffn"] if role == "ffn" else (role,) for role in LAYOUTS[side]]
    roles = [sub.export_as for sub in stack.layer]
    if len(roles) != len(layout) or any(role not in allowed for role, allowed in zip(roles, layout)):
        names = ", ".join(s.type for s in stack.layer)
        wanted = ", ".join(" or ".join(allowed) for allowed in layout)
        raise UserError(f"cannot export to {target}: {side}.layer is [{names}]; {target} has only [{wanted}]")
    if stack.add_norm.norm.export_as not in has["norm"]:
        raise UserError(
            f"cannot export to {target}: {side}.add_norm.norm is {stack.add_norm.norm.type}; {target} has "
            f"{' and '.join(has['norm'])} only"
        )
    _check_switches(stack, side, target, switches)
    if stack.position_bias is not None:
        raise UserError(
            f"cannot export to {target}: {side}.position_bias ({stack.position_bias.type}) has no counterpart in {target}"
        )
    heads = {(s.table3["h"], s.table3["d_k"], s.table3["d_v"]) for s in stack.layer if s.export_as not in FFN}
    if len(heads) > 1:
        raise UserError(
            f"cannot export to {target}: the attention sub-layers of {side}.layer differ in (h, d_k, d_v) "
            f"{sorted(heads)}; {target} has one head shape per stack"
        )
    ((h, d_k, d_v),) = heads
    if d_k != d_v:
        raise UserError(f"cannot export to {target}: {side} attention has d_k ({d_k}) != d_v ({d_v}); {target} has one head size")


def _check_switches(stack: StackSpec, side: str, target: str, switches: tuple[str, ...]) -> None:
    """No sub-layer departs from the paper in a way `target` cannot hold (`switches`, an allow-list)."""
    for j, sub in enumerate(stack.layer):
        for switch, value in sub.switches.items():
            if switch in switches:
                continue
            field = {"ffn": "type"}.get(switch, switch)
            if not switches:
                has = "Marian has the paper's blocks only" + (
                    " (export --to ctranslate2 takes it)" if switch in CT2_SWITCHES else ""
                )
            else:
                has = f"{target} holds {', '.join(switches)} only"
            raise UserError(f"cannot export to {target}: {side}.layer[{j}].{field} ({value}); {has}")


def stack_spec_heads(stack: StackSpec) -> tuple[int, int]:
    """(h, d_k) of a stack that passed `check_uniform`."""
    columns = stack.layer[0].table3
    return columns["h"], columns["d_k"]
