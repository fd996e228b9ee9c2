"""The graph: how the model's stacks are wired and what it reads (`model.graph`, a slot).

aiayn's two: the paper's encoder-decoder (Figure 1), and the decoder alone (GPT's graph, fairseq's
transformer_lm: a language model of one language's text, or translation read as
`<s> source <sep> target`). A graph's spec answers what the schemas ask of it (which stacks it
holds, what it refuses, how many positions its longest input needs); everything else is asked of
its registration (builder/graphs/: the model it builds, its data, its inference object, its export).
"""

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from aiayn.schemas._base import FieldError, Float32, Spec


class GraphSpec(Spec):
    """The base of a graph's spec (a plugin's too): a `type: Literal["name"]` field and its settings."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def has_encoder(self) -> bool:
        """It holds model.encoder, a stack whose output the decoder's cross-attention reads."""
        return False

    @property
    def table3(self) -> dict[str, Any]:
        """Its columns in `aiayn show`'s Table 3 line and in results tables ({} for the paper's graph)."""
        return {}

    def task(self, experiment: Any) -> str:
        """What it is trained to do, as results.json and `aiayn serve`'s /models say: translation, language_model."""
        return "translation"

    def check_model(self, model: Any) -> None:
        """Raise a FieldError (a path under `model`) where the model section does not fit the graph.

        :param model: the ModelSpec being validated"""

    def check_experiment(self, experiment: Any) -> None:
        """Raise a FieldError (a path from the experiment's root) where the data or training does not fit.

        :param experiment: the ExperimentSpec being validated"""

    def positions_needed(self, experiment: Any) -> tuple[int, str]:
        """(positions a sentence of data.max_len tokens needs as the model reads it, why)."""
        return experiment.data.max_len + 1, "the decoder input starts with <s>"

    def longest_fitting(self, experiment: Any, rows: int) -> int:
        """The longest data.max_len whose sentences a position table of `rows` rows covers."""
        return rows - 1


class EncoderDecoderSpec(GraphSpec):
    """The paper's graph (Sec. 3, Figure 1): the encoder reads the source, the decoder the target
    shifted right and, through cross-attention, the encoder's output."""

    type: Literal["encoder_decoder"] = "encoder_decoder"

    @property
    def has_encoder(self) -> bool:
        return True

    def check_model(self, model: Any) -> None:
        if model.decoder is None:
            raise FieldError("decoder", "Field required: graph encoder_decoder writes with a decoder")
        if model.encoder is None:
            raise FieldError(
                "encoder",
                "graph encoder_decoder reads the source with an encoder, and model.encoder is absent; add one, or set "
                "model.graph.type=decoder_only for the decoder alone",
            )
        if not any(s.reads_memory for _, s in model.decoder.located()):
            raise FieldError(
                "decoder.layer",
                "the decoder has no cross_attention sub-layer, so it never sees the source "
                "sentence; add {type: cross_attention, h: ..., d_k: ..., d_v: ...}, or drop model.encoder for a decoder-only model",
            )

    def check_experiment(self, experiment: Any) -> None:
        data = experiment.data
        if data.side is not None:
            raise FieldError(
                "data.side",
                f"{data.side}: one language's text trains a language model, which has no encoder to read a source; drop "
                "model.encoder (and cross_attention) for a decoder-only model, or drop data.side to translate",
            )
        if experiment.train.source_loss:
            raise FieldError(
                "train.source_loss",
                "is the loss on a decoder-only translation's source tokens; this model reads no source in its sequence: drop it",
            )


class DecoderOnlySpec(GraphSpec):
    """The decoder alone: no encoder, no cross-attention, one embedding. It reads one language's
    text (data.side: a language model) or a pair as one sequence, `<s> source <sep> target`, whose
    source its self-attention reads causally (a language model of the pair) or, with
    `source_mask: prefix`, all of it from every source position (Raffel et al. 2020's prefix LM,
    Gao et al. 2022's bidirectional source)."""

    type: Literal["decoder_only"] = "decoder_only"
    source_mask: Literal["causal", "prefix"] = "causal"

    @property
    def table3(self) -> dict[str, Any]:
        return {"graph": "decoder-only", **({"source_mask": self.source_mask} if self.source_mask != "causal" else {})}

    def task(self, experiment: Any) -> str:
        return "language_model" if experiment.data.side is not None else "translation"

    def check_model(self, model: Any) -> None:
        if model.decoder is None:
            raise FieldError("decoder", "Field required: graph decoder_only is the decoder alone")
        if model.encoder is not None:
            raise FieldError(
                "encoder",
                "graph decoder_only is the decoder alone, and model.encoder is given; drop it (and the decoder's "
                "cross_attention), or set model.graph.type=encoder_decoder",
            )
        if model.source_eos:
            raise FieldError(
                "source_eos",
                "a decoder-only model has no encoder to end its sources with </s>: it reads <s> source <sep> target; "
                "set source_eos: false",
            )

    def check_experiment(self, experiment: Any) -> None:
        reads_pairs = experiment.data.side is None
        if self.source_mask != "causal" and not reads_pairs:
            raise FieldError(
                "model.graph.source_mask",
                f"{self.source_mask} masks the source of a pair read as one sequence, and this model reads one language's "
                f"text (data.side: {experiment.data.side}); drop source_mask, or drop data.side to translate",
            )
        if experiment.train.source_loss and not reads_pairs:
            raise FieldError(
                "train.source_loss",
                "is the loss on a decoder-only translation's source tokens; this model reads no source in its sequence: drop it",
            )

    def positions_needed(self, experiment: Any) -> tuple[int, str]:
        if experiment.data.side is not None:
            return super().positions_needed(experiment)
        return 2 * experiment.data.max_len + 2, "<s> source <sep> target: twice it and 2"

    def longest_fitting(self, experiment: Any, rows: int) -> int:
        return super().longest_fitting(experiment, rows) if experiment.data.side is not None else (rows - 2) // 2


class EncoderOnlySpec(GraphSpec):
    """The encoder alone (BERT's graph; RoBERTa's, ModernBERT's): `model.encoder`, a stack of
    bidirectional self-attention, over one language's text (data.side) read as `<s> x </s>`,
    pretrained as a masked language model (Devlin et al. 2019): `mask_probability` of the tokens
    are predicted, of those `mask_replace` become `<mask>`, `mask_random` a random token and the
    rest stay (BERT's 15% and 80/10/10). The masked-LM head transforms the encoder's output (a
    d_model x d_model layer, `head_activation`, the stack's norm) before the output projection."""

    type: Literal["encoder_only"] = "encoder_only"
    mask_probability: Float32 = Field(default=0.15, gt=0.0, lt=1.0)
    mask_replace: Float32 = Field(default=0.8, ge=0.0, le=1.0)
    mask_random: Float32 = Field(default=0.1, ge=0.0, le=1.0)
    head_activation: Literal["relu", "gelu", "gelu_tanh", "silu"] = "gelu"
    head_bias: bool = True

    @property
    def table3(self) -> dict[str, Any]:
        return {"graph": "encoder-only"}

    def task(self, experiment: Any) -> str:
        return "masked_lm"

    def check_model(self, model: Any) -> None:
        if model.encoder is None:
            raise FieldError("encoder", "Field required: graph encoder_only is the encoder alone (its bidirectional stack)")
        if model.decoder is not None:
            raise FieldError(
                "decoder",
                "graph encoder_only is the encoder alone, and model.decoder is given; drop it, or set "
                "model.graph.type=encoder_decoder",
            )
        if self.mask_replace + self.mask_random > 1:
            raise FieldError(
                "graph.mask_random",
                f"mask_replace ({self.mask_replace}) and mask_random ({self.mask_random}) share the predicted tokens, "
                "and add up to more than 1",
            )

    def check_experiment(self, experiment: Any) -> None:
        if experiment.data.side is None:
            raise FieldError(
                "data.side",
                "graph encoder_only reads one language's text, and data.side is absent (a pair); set data.side to the "
                "language it reads",
            )
        if experiment.train.source_loss:
            raise FieldError("train.source_loss", "is the loss on a decoder-only translation's source tokens: drop it")
        if experiment.data.static_shapes is not None:
            raise FieldError(
                "data.static_shapes",
                "not yet for graph encoder_only: its rows are masked as they are collated; drop it",
            )

    def positions_needed(self, experiment: Any) -> tuple[int, str]:
        return experiment.data.max_len + 2, "a sentence is read as <s> x </s>"

    def longest_fitting(self, experiment: Any, rows: int) -> int:
        return rows - 2


def graph_of_release(data: dict[str, Any]) -> dict[str, Any]:
    """A model section as aiayn wrote it before `model.graph` (its run directories and checkpoints
    keep it): the graph is the decoder alone where `encoder` is absent, and `source_mask` is its setting."""
    if "graph" in data and "source_mask" in data:
        graph = data["graph"]
        if not isinstance(graph, dict) or "source_mask" in graph:
            raise FieldError(
                "source_mask", "is read as graph.source_mask, and graph is given with it; set graph.source_mask alone"
            )
        return {**{k: v for k, v in data.items() if k != "source_mask"}, "graph": {**graph, "source_mask": data["source_mask"]}}
    if "graph" in data:
        return data
    rest = {k: v for k, v in data.items() if k != "source_mask"}
    if data.get("encoder") is not None:
        if "source_mask" in data and data["source_mask"] != "causal":
            raise FieldError(
                "source_mask",
                f"{data['source_mask']} masks the source within a decoder-only model's one sequence; this model's encoder "
                "reads all of it already: drop source_mask, or drop model.encoder",
            )
        return {**rest, "graph": {"type": "encoder_decoder"}}
    mask = {"source_mask": data["source_mask"]} if "source_mask" in data else {}
    return {**rest, "graph": {"type": "decoder_only", **mask}}
