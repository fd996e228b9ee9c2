"""What each target cannot express, refused before any work (and before importing its package),
with a message naming the YAML field to change. Specs say what they are exported as
(`export_as`): a block without a counterpart (a plugin's, say) is refused by name."""

from aiayn.builder.errors import UserError
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.stacks import StackSpec

CTRANSLATE2 = "CTranslate2"
MARIAN = "Hugging Face Marian"
# the one layer layout each stack may have: the paper's (Figure 1)
LAYOUTS = {
    "encoder": ("self_attention", "feed_forward"),
    "decoder": ("causal_self_attention", "cross_attention", "feed_forward"),
}


def check_ctranslate2(spec: ModelSpec) -> None:
    """Refuse, naming the field, what a TransformerSpec cannot hold."""
    check_uniform(spec, CTRANSLATE2)
    for side in ("encoder", "decoder"):
        stack = getattr(spec, side)
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
    """Refuse, naming the field, what a MarianConfig cannot hold."""
    check_uniform(spec, MARIAN)
    if spec.positional.export_as == "learned":
        raise UserError(
            f"cannot export to {MARIAN}: positional.type: learned; Marian's positions are fixed sinusoids, "
            "so train with positional.type: sinusoidal"
        )
    if not spec.embedding.shared_vocab:
        raise UserError(
            f"cannot export to {MARIAN}: embedding.shared_vocab: false; the exported tokenizer is one "
            "PreTrainedTokenizerFast, so train with a shared vocabulary (or export --to ctranslate2)"
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


def check_uniform(spec: ModelSpec, target: str) -> None:
    """Every layer of a stack alike, in the paper's layout, one head shape per stack, the paper's
    norm and positions; else a UserError naming the YAML field that `target` cannot express."""
    if spec.positional.export_as is None:
        raise UserError(f"cannot export to {target}: positional.type: {spec.positional.type} has no counterpart in {target}")  # type: ignore[attr-defined]
    for side in ("encoder", "decoder"):
        stack: StackSpec = getattr(spec, side)
        differing = sorted(i for i, layer in stack.overrides.items() if layer != stack.layer)
        if differing:
            raise UserError(
                f"cannot export to {target}: {side}.overrides makes a heterogeneous stack (layers {differing} differ "
                f"from {side}.layer), and {target} repeats one layer; export a model whose layers are all alike"
            )
        for j, sub in enumerate(stack.layer):
            if sub.export_as is None:
                raise UserError(f"cannot export to {target}: {side}.layer[{j}] is {sub.type}, which has no counterpart in {target}")  # type: ignore[attr-defined]
        roles = tuple(sub.export_as for sub in stack.layer)
        if roles != LAYOUTS[side]:
            names = ", ".join(s.type for s in stack.layer)  # type: ignore[attr-defined]
            raise UserError(f"cannot export to {target}: {side}.layer is [{names}]; {target} has only [{', '.join(LAYOUTS[side])}]")
        if stack.add_norm.norm.export_as != "layer_norm":
            raise UserError(
                f"cannot export to {target}: {side}.add_norm.norm is {stack.add_norm.norm.type}; {target} has LayerNorm only"  # type: ignore[attr-defined]
            )
        if stack.position_bias is not None:
            raise UserError(
                f"cannot export to {target}: {side}.position_bias ({stack.position_bias.type}) has no counterpart in {target}"  # type: ignore[attr-defined]
            )
        heads = {(s.table3["h"], s.table3["d_k"], s.table3["d_v"]) for s in stack.layer if s.export_as != "feed_forward"}
        if len(heads) > 1:
            raise UserError(
                f"cannot export to {target}: the attention sub-layers of {side}.layer differ in (h, d_k, d_v) "
                f"{sorted(heads)}; {target} has one head shape per stack"
            )
        ((h, d_k, d_v),) = heads
        if d_k != d_v:
            raise UserError(
                f"cannot export to {target}: {side} attention has d_k ({d_k}) != d_v ({d_v}); {target} has one head size"
            )


def stack_spec_heads(stack: StackSpec) -> tuple[int, int]:
    """(h, d_k) of a stack that passed `check_uniform`."""
    columns = stack.layer[0].table3
    return columns["h"], columns["d_k"]
