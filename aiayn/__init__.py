"""aiayn: a declarative, config-driven builder for the Transformer of "Attention Is All You Need".

For a notebook or a script (README, "Python"):

    load_experiment(path, overrides=())   an experiment YAML, validated (ExperimentSpec), as
                                          `aiayn validate` reads it (UserError says what is wrong)
    build_model(spec)                     its model, initialised (an nn.Module)
    load_run(run_or_checkpoint)           a trained model as a Translator: .translate(lines) gives
                                          what `aiayn translate` gives (n_best=k, with_scores=True,
                                          alignments=True: Translation records); .score(sources,
                                          targets) what `aiayn score` gives (Score records);
                                          .model, .spec, tokenizers; a language model's run as a
                                          LanguageModel: .generate(prompts) gives what
                                          `aiayn generate` gives; a list of runs: their ensemble
    load_ensemble(runs)                   two or more translation models as one Translator (the
                                          mean of their next-token probabilities; one tokenizer)

and what a plugin needs to add a block (docs/plugins.md):

    specs       Spec, SublayerSpec, NormSpec, PositionalSpec, StackBiasSpec, ScoreSpec, TextStepSpec,
                TokenizerSpec, UtilitySpec (the bases of a block's YAML schema; a text step's build(spec, lang)
                returns its function of a line; a tokenizer's build(spec, TokenizerInputs) its
                (source, target, description), e.g. FastTokenizers; an MBR utility's build(spec) its
                function (candidates, references) -> scores array), PositiveInt, Probability, FieldError
    register    register(SpecClass, slot=..., build=..., flops=..., activations=..., label=...),
                BuildContext (what build receives; its StackPlan, what a stack's blocks share),
                PluginError
    blocks      Sublayer (the base of a sub-layer block), LayerContext, PackedRows, DecoderState
                (what its forward reads), and blocks to compose: SelfAttention and CrossAttention
                (MultiHeadAttention's two inputs; parts handed in: kv_heads, mask (CausalMask,
                with an optional window), qk (q/k modules in order: Rotary, a QK-norm of yours),
                score_bias, score), ScoreStep (the base of a score step: normalize(scores,
                allowed) -> weights), PositionwiseFeedForward, Dropout
    attention   AttentionSpec (the base of an attention's spec: h, d_k, d_v, kv_heads, rotary),
                attention_parts(spec, ctx) (the keyword arguments it decides), attention_flops,
                attention_activations (its costs, to add a part's to)

Everything else (aiayn.blocks, aiayn.builder, aiayn.schemas) is internal. Names are imported on
first use, so `import aiayn` (and `import aiayn.schemas`) does not pay for PyTorch.
"""

import importlib
from typing import Any

_PUBLIC = {
    "load_experiment": "aiayn.builder.run.config",
    "build_model": "aiayn.builder.model.build",
    "load_run": "aiayn.builder.decode.translator",
    "load_ensemble": "aiayn.builder.decode.translator",
    "Translator": "aiayn.builder.decode.translator",
    "LanguageModel": "aiayn.builder.decode.language_model",
    "Translation": "aiayn.builder.decode.records",
    "Score": "aiayn.builder.decode.records",
    "ExperimentSpec": "aiayn.schemas.experiment",
    "UserError": "aiayn.builder.errors",
    "Spec": "aiayn.schemas._base",
    "PositiveInt": "aiayn.schemas._base",
    "Probability": "aiayn.schemas._base",
    "FieldError": "aiayn.schemas._base",
    "SublayerSpec": "aiayn.schemas.sublayer",
    "NormSpec": "aiayn.schemas.norm",
    "PositionalSpec": "aiayn.schemas.positional",
    "StackBiasSpec": "aiayn.schemas.stack_bias",
    "ScoreSpec": "aiayn.schemas.score",
    "TextStepSpec": "aiayn.schemas.text_step",
    "TokenizerSpec": "aiayn.schemas.tokenizer",
    "UtilitySpec": "aiayn.schemas.utility",
    "TokenizerInputs": "aiayn.builder.data.make_tokenizers",
    "FastTokenizer": "aiayn.builder.data.bpe",
    "PluginError": "aiayn.schemas.slots",
    "register": "aiayn.builder.model.registry",
    "BuildContext": "aiayn.builder.model.registry",
    "StackPlan": "aiayn.builder.model.registry",
    "Sublayer": "aiayn.blocks",
    "LayerContext": "aiayn.blocks",
    "PackedRows": "aiayn.blocks",
    "DecoderState": "aiayn.blocks",
    "MultiHeadAttention": "aiayn.blocks",
    "SelfAttention": "aiayn.blocks",
    "CrossAttention": "aiayn.blocks",
    "CausalMask": "aiayn.blocks",
    "Rotary": "aiayn.blocks",
    "ScoreStep": "aiayn.blocks",
    "AttentionSpec": "aiayn.schemas.attention",
    "attention_parts": "aiayn.builder.model.attention",
    "attention_flops": "aiayn.builder.model.attention",
    "attention_activations": "aiayn.builder.model.attention",
    "PositionwiseFeedForward": "aiayn.blocks",
    "Dropout": "aiayn.blocks",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
