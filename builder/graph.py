"""What the rest of aiayn asks of a model's graph, and where it asks it.

A graph is a registered value (fairseq2's model families): its spec (schemas/graph.py, the
`graph` slot: `model.graph` in the YAML) and the `Graph` its registration builds, which answers
every question that depends on the graph: the model it builds, the object that translates or
generates with it, what training validates and scores, its line in `aiayn show`, where it exports.
aiayn's two are builder/graphs/encoder_decoder.py and builder/graphs/decoder_only.py; a plugin
registers a third the same way (`registry.add(Spec, slot="graph", build=MyGraph)`).

Callers hold a `Graph` (`graph_of(spec)`) and never ask which one: this module imports only the
schemas and the registry, so every layer may ask it, and none imports a graph's file. The answers
are typed loosely (Any) where their types live in a layer above the caller's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiayn.builder.errors import UserError
from aiayn.builder.registry import registry_of
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.graph import GraphSpec
from aiayn.schemas.model import ModelSpec


class Graph:
    """A graph's answers; a registration's `build(spec)` makes one from the graph's spec.

    :param spec: the graph's spec (`model.graph`)"""

    name = "graph"  # how `aiayn show` and messages name it: "encoder-decoder", "decoder-only"
    sides: tuple[str, ...] = ("target",)  # the input embeddings its model has: source, target

    def __init__(self, spec: GraphSpec) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"

    def build(self, model: ModelSpec) -> Any:
        """The model (a blocks.TransformerGraph) of the model section, uninitialised, on the current device."""
        raise NotImplementedError

    def extra_parameters(self, model: ModelSpec) -> list[tuple[str, Any]]:
        """(label, module) of what the model holds besides its embeddings and stacks (a head), for `aiayn show`'s
        count; built on the meta device there."""
        return []

    def flops_basis(self, length: int) -> str:
        """What `aiayn show`'s forward FLOPs are counted per, for sequences of `length` tokens (the model reads one)."""
        return f"token (a sequence of {length} tokens)"

    def tokenizer_layout(self, spec: ExperimentSpec) -> str | None:
        """How `aiayn show` says the text becomes ids, where the graph's reading decides it (None: the tokenizer's own)."""
        return None

    def languages(self, spec: ExperimentSpec) -> tuple[str, str]:
        """(the language of what the model reads, of what it writes): the files of a split and the text pipelines
        are theirs (data.src_lang and data.tgt_lang by default)."""
        return spec.data.src_lang, spec.data.tgt_lang

    def reading(self, spec: ExperimentSpec) -> Any:
        """What the model reads of a split's files and how its batches hold it (builder/data/reading.py's Reading:
        the DataModule's datasets, collators, token budget and static shapes, the teacher-forced scores' batches).
        None: the data layer's default Reading, a pair read apart (the source by an encoder, `<s> y` by a decoder)."""
        return None

    def inference(self, loaded: Any) -> Any:
        """What `aiayn.load_run` returns for a loaded model (decode's ForInference): a Translator or a LanguageModel."""
        raise NotImplementedError

    def ensemble_refusal(self, spec: ExperimentSpec, path: Path) -> str | None:
        """Why a model of this graph at `path` cannot join an ensemble (None: it can)."""
        return None

    def validation_callback(self, spec: ExperimentSpec) -> Any:
        """The Lightning callback that shows what the model makes at each validation (TensorBoard's samples)."""
        raise NotImplementedError

    def final_scores(self, spec: ExperimentSpec, model: Any, data: Any) -> tuple[dict[str, Any], Any, Any]:
        """(metrics, outputs, references) of the final evaluation on the validation split (outputs None: nothing
        to write as translations)."""
        raise NotImplementedError

    def export(self, loaded: Any, target: str, name: str, out: Path, quantization: str | None) -> bool:
        """Write `loaded` to `out` for `target` (named `name`) where the graph has a route of its own and return
        True; False for the translator formats' route (export/__init__.py's TARGETS); raise a UserError to refuse."""
        return False

    def check_translator_export(self, model: ModelSpec, target: str) -> None:
        """Raise a UserError naming the field where the translator formats (Marian, CTranslate2), which hold an
        encoder-decoder, cannot hold the graph (by default: they cannot)."""
        raise UserError(f"cannot export to {target}: model.graph.type: {self.spec.type}; {target} holds an encoder-decoder")


def graph_of(spec: ExperimentSpec | ModelSpec | GraphSpec) -> Graph:
    """The registered graph of an experiment, a model section or a graph's spec.

    :param spec: an ExperimentSpec, its model section or its `model.graph`, validated against a registry
    :returns: the Graph its registration builds
    :raises UserError: a spec made without a registry, or a graph nothing registers"""
    graph = spec.model.graph if isinstance(spec, ExperimentSpec) else spec.graph if isinstance(spec, ModelSpec) else spec
    made = registry_of(graph).registration(graph).build(graph)
    if not isinstance(made, Graph):
        raise UserError(f"the registration of graph {graph.type!r} built {type(made).__name__}, not an aiayn Graph")
    return made
