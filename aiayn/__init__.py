"""aiayn: a declarative, config-driven builder for the Transformer of "Attention Is All You Need".

For a notebook or a script (docs/python.md):

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
    Decoding(strategy, n_best, ...)       how a translate call finds and chooses its candidates, as
                                          one value (translate(lines, decoding=...)); its strategy
                                          BeamSearch(), Greedy(), Sampled(Sampling(top_p=0.9)), a plugin's
    load_registry(selection=None)         the registrations: aiayn's own blocks and the installed
                                          plugins' (a Registry; each function above takes one as
                                          registry=, default this); Registry.extended(function)
                                          adds what function(registry)'s registry.add calls add

and what a plugin needs to add a block (docs/plugins.md):

    specs       Spec, SublayerSpec, NormSpec, PositionalSpec, StackBiasSpec, ScoreSpec, TextStepSpec,
                TokenizerSpec, UtilitySpec (the bases of a block's YAML schema; a text step's build(spec, lang)
                returns its function of a line; a tokenizer's build(spec, TokenizerInputs) its
                (source, target, description), FastTokenizers or a Tokenizer class of its own (then
                registry.add(..., load=) reads it back); an MBR utility's build(spec) its
                function (candidates, references) -> scores array), GraphSpec (a graph's: its
                registration's build(spec) returns its Graph, what the rest asks of it; graph_of(spec)
                gives an experiment's), SamplingFilterSpec (a sampling filter's: its build(spec) returns a
                function logits -> logits, -inf where a token is removed), StrategySpec (a decoding strategy's:
                its build(spec) returns a Strategy, which finds each source's candidates), PositiveInt,
                Probability, FieldError
    register    def register(registry): registry.add(SpecClass, slot=..., build=..., flops=..., activations=...,
                label=..., load=...) (the entry point's function; registry a RegistryBuilder),
                BuildContext (what build receives; its StackPlan, what a stack's blocks share),
                PluginError; aiayn.register (aiayn 0.x) only says what to write instead
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
from typing import TYPE_CHECKING, Any

_PUBLIC = {
    "load_experiment": "aiayn._api",
    "load_registry": "aiayn.builder.plugins",
    "Registry": "aiayn.builder.registry",
    "build_model": "aiayn.builder.model.build",
    "load_run": "aiayn.builder.decode.load",
    "load_ensemble": "aiayn.builder.decode.load",
    "Translator": "aiayn.builder.decode.translator",
    "LanguageModel": "aiayn.builder.decode.language_model",
    "Translation": "aiayn.builder.decode.records",
    "Score": "aiayn.builder.decode.records",
    "LineScore": "aiayn.builder.decode.records",
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
    "GraphSpec": "aiayn.schemas.graph",
    "SamplingFilterSpec": "aiayn.schemas.sampling_filter",
    "StrategySpec": "aiayn.schemas.strategy",
    "Strategy": "aiayn.builder.decode.strategy",
    "BeamSearch": "aiayn.builder.decode.strategy",
    "Greedy": "aiayn.builder.decode.strategy",
    "Sampled": "aiayn.builder.decode.strategy",
    "Decoding": "aiayn.builder.decode.strategy",
    "MaskedLanguageModel": "aiayn.builder.decode.masked_language_model",
    "Fill": "aiayn.builder.decode.masked_language_model",
    "Wanted": "aiayn.builder.decode.strategy",
    "Sampling": "aiayn.builder.decode.sampling",
    "Graph": "aiayn.builder.graph",
    "graph_of": "aiayn.builder.graph",
    "TokenizerInputs": "aiayn.builder.data.make_tokenizers",
    "FastTokenizer": "aiayn.builder.data.bpe",
    "Tokenizer": "aiayn.builder.data.tokenizer",
    "PluginError": "aiayn.schemas.slots",
    "register": "aiayn.builder.registry",
    "RegistryBuilder": "aiayn.builder.registry",
    "BuildContext": "aiayn.builder.model.parts",
    "StackPlan": "aiayn.builder.model.parts",
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

if TYPE_CHECKING:  # the same names, seen by type checkers and IDEs (tests/test_api.py holds them equal to _PUBLIC)
    from aiayn._api import load_experiment as load_experiment
    from aiayn.blocks import CausalMask as CausalMask
    from aiayn.blocks import CrossAttention as CrossAttention
    from aiayn.blocks import DecoderState as DecoderState
    from aiayn.blocks import Dropout as Dropout
    from aiayn.blocks import LayerContext as LayerContext
    from aiayn.blocks import MultiHeadAttention as MultiHeadAttention
    from aiayn.blocks import PackedRows as PackedRows
    from aiayn.blocks import PositionwiseFeedForward as PositionwiseFeedForward
    from aiayn.blocks import Rotary as Rotary
    from aiayn.blocks import ScoreStep as ScoreStep
    from aiayn.blocks import SelfAttention as SelfAttention
    from aiayn.blocks import Sublayer as Sublayer
    from aiayn.builder.data.bpe import FastTokenizer as FastTokenizer
    from aiayn.builder.data.make_tokenizers import TokenizerInputs as TokenizerInputs
    from aiayn.builder.data.tokenizer import Tokenizer as Tokenizer
    from aiayn.builder.decode.language_model import LanguageModel as LanguageModel
    from aiayn.builder.decode.load import load_ensemble as load_ensemble
    from aiayn.builder.decode.load import load_run as load_run
    from aiayn.builder.decode.masked_language_model import Fill as Fill
    from aiayn.builder.decode.masked_language_model import MaskedLanguageModel as MaskedLanguageModel
    from aiayn.builder.decode.records import LineScore as LineScore
    from aiayn.builder.decode.records import Score as Score
    from aiayn.builder.decode.records import Translation as Translation
    from aiayn.builder.decode.sampling import Sampling as Sampling
    from aiayn.builder.decode.strategy import BeamSearch as BeamSearch
    from aiayn.builder.decode.strategy import Decoding as Decoding
    from aiayn.builder.decode.strategy import Greedy as Greedy
    from aiayn.builder.decode.strategy import Sampled as Sampled
    from aiayn.builder.decode.strategy import Strategy as Strategy
    from aiayn.builder.decode.strategy import Wanted as Wanted
    from aiayn.builder.decode.translator import Translator as Translator
    from aiayn.builder.errors import UserError as UserError
    from aiayn.builder.graph import Graph as Graph
    from aiayn.builder.graph import graph_of as graph_of
    from aiayn.builder.model.attention import attention_activations as attention_activations
    from aiayn.builder.model.attention import attention_flops as attention_flops
    from aiayn.builder.model.attention import attention_parts as attention_parts
    from aiayn.builder.model.build import build_model as build_model
    from aiayn.builder.model.parts import BuildContext as BuildContext
    from aiayn.builder.model.parts import StackPlan as StackPlan
    from aiayn.builder.plugins import load_registry as load_registry
    from aiayn.builder.registry import Registry as Registry
    from aiayn.builder.registry import RegistryBuilder as RegistryBuilder
    from aiayn.builder.registry import register as register
    from aiayn.schemas._base import FieldError as FieldError
    from aiayn.schemas._base import PositiveInt as PositiveInt
    from aiayn.schemas._base import Probability as Probability
    from aiayn.schemas._base import Spec as Spec
    from aiayn.schemas.attention import AttentionSpec as AttentionSpec
    from aiayn.schemas.experiment import ExperimentSpec as ExperimentSpec
    from aiayn.schemas.graph import GraphSpec as GraphSpec
    from aiayn.schemas.norm import NormSpec as NormSpec
    from aiayn.schemas.positional import PositionalSpec as PositionalSpec
    from aiayn.schemas.sampling_filter import SamplingFilterSpec as SamplingFilterSpec
    from aiayn.schemas.score import ScoreSpec as ScoreSpec
    from aiayn.schemas.slots import PluginError as PluginError
    from aiayn.schemas.stack_bias import StackBiasSpec as StackBiasSpec
    from aiayn.schemas.strategy import StrategySpec as StrategySpec
    from aiayn.schemas.sublayer import SublayerSpec as SublayerSpec
    from aiayn.schemas.text_step import TextStepSpec as TextStepSpec
    from aiayn.schemas.tokenizer import TokenizerSpec as TokenizerSpec
    from aiayn.schemas.utility import UtilitySpec as UtilitySpec


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
