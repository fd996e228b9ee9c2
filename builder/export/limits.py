"""What each target cannot express, refused before any work (and before importing its package),
with a message naming the YAML field to change."""

from aiayn.builder.errors import UserError
from aiayn.schemas.attention import CausalSelfAttentionSpec, CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec
from aiayn.schemas.model import ModelSpec
from aiayn.schemas.positional import LearnedSpec
from aiayn.schemas.stacks import StackSpec

CTRANSLATE2 = "CTranslate2"
MARIAN = "Hugging Face Marian"
# the one layer layout each stack may have: the paper's (Figure 1)
LAYOUTS = {
    "encoder": (SelfAttentionSpec, FeedForwardSpec),
    "decoder": (CausalSelfAttentionSpec, CrossAttentionSpec, FeedForwardSpec),
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
    if spec.encoder.add_norm.eps != spec.decoder.add_norm.eps:
        raise UserError(
            f"cannot export to {CTRANSLATE2}: encoder.add_norm.eps ({spec.encoder.add_norm.eps}) != decoder.add_norm.eps "
            f"({spec.decoder.add_norm.eps}); {CTRANSLATE2} has one layer_norm_epsilon"
        )


def check_marian(spec: ModelSpec) -> None:
    """Refuse, naming the field, what a MarianConfig cannot hold."""
    check_uniform(spec, MARIAN)
    if isinstance(spec.positional, LearnedSpec):
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
    """Every layer of a stack alike, in the paper's layout, one head shape per stack; else a
    UserError naming the YAML field that `target` cannot express."""
    for side in ("encoder", "decoder"):
        stack: StackSpec = getattr(spec, side)
        differing = sorted(i for i, layer in stack.overrides.items() if layer != stack.layer)
        if differing:
            raise UserError(
                f"cannot export to {target}: {side}.overrides makes a heterogeneous stack (layers {differing} differ "
                f"from {side}.layer), and {target} repeats one layer; export a model whose layers are all alike"
            )
        kinds = tuple(type(s) for s in stack.layer)
        if kinds != LAYOUTS[side]:
            names = ", ".join(s.type for s in stack.layer)
            wanted = ", ".join(k.model_fields["type"].default for k in LAYOUTS[side])
            raise UserError(f"cannot export to {target}: {side}.layer is [{names}]; {target} has only [{wanted}]")
        heads = {(s.h, s.d_k, s.d_v) for s in stack.layer if not isinstance(s, FeedForwardSpec)}
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
    first = stack.layer[0]
    return first.h, first.d_k  # type: ignore[union-attr]
