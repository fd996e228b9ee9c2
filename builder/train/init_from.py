"""init_from (schemas/init_from.py): a new run whose first weights are a trained model's.

The source is read as `aiayn translate` reads it (a run directory gives its model as the run
defines it: averaged where it averaged). With `tokenizer: source` the run takes the source's
tokenizer(s) and text pipeline, so that its ids mean what the source's embeddings learnt. The
weights go in by builder/model/transfer.py (exact, or as init_from.convert allows); where they
came from is recorded in status.json, results.json and config.yaml's first line."""

from typing import Any, NamedTuple

from torch import nn

from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.checkpoint import ForInference, load_source_model
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.model.transfer import transfer_weights
from aiayn.builder.registry import registry_of
from aiayn.builder.run.config import config_hash
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.init_from import InitFromSpec
from aiayn.schemas.text import step_names


class Source(NamedTuple):
    """The trained model a run starts from."""

    given: InitFromSpec
    loaded: ForInference

    @property
    def tokenizers(self) -> tuple[Tokenizer, Tokenizer] | None:
        """The (source, target) tokenizers the run takes, None where it trains its own."""
        return (self.loaded.src_tokenizer, self.loaded.tgt_tokenizer) if self.given.tokenizer == "source" else None

    def record(self) -> dict[str, Any]:
        """Where the weights came from: results.json's and status.json's `init_from`."""
        spec = self.loaded.spec
        return {
            "path": self.given.path,
            "checkpoint": str(resolved(self.loaded.checkpoint)),
            "model": self.loaded.what,
            "name": spec.name,
            "config_hash": config_hash(spec),
            "step": self.loaded.step,
            "tokenizer": self.given.tokenizer,
        }


def load_source(spec: ExperimentSpec) -> Source | None:
    """The experiment's init_from, loaded and checked against it; None where it has none."""
    given = spec.init_from
    if given is None:
        return None
    loaded = load_source_model(given.path, registry_of(spec))
    _check_tokenizer_kind(spec, loaded)
    theirs, ours = loaded.spec.model.embedding.vocab_size, spec.model.embedding.vocab_size
    if theirs != ours:
        where = "and the tokenizer is the source's (init_from.tokenizer: source)" if given.tokenizer == "source" else ""
        raise UserError(
            f"init_from {given.path}: its embeddings hold {theirs} tokens and this model's {ours} "
            f"(model.embedding.vocab_size); a run starts from them with the same vocabulary: set dims.vocab_size={theirs} {where}".rstrip()
        )
    return Source(given, loaded)


def _check_tokenizer_kind(spec: ExperimentSpec, loaded: ForInference) -> None:
    """A data.tokenizer the experiment states must be of the kind the source's is, where the run takes the source's."""
    assert spec.init_from is not None
    ours, theirs = spec.data.tokenizer.type, loaded.src_tokenizer.kind
    if spec.init_from.tokenizer == "source" and "tokenizer" in spec.data.model_fields_set and ours != theirs:
        raise UserError(
            f"data.tokenizer.type is {ours}, but init_from's source {spec.init_from.path} tokenizes with {theirs}, and the run "
            "takes its tokenizer (init_from.tokenizer: source); drop data.tokenizer to take the source's, or set "
            "init_from.tokenizer: own to train one of this kind (the embeddings then meet ids they did not learn)"
        )


def with_source_pipeline(spec: ExperimentSpec, theirs: ExperimentSpec | None) -> ExperimentSpec:
    """`spec` with the text pipeline of `theirs` (the source's, or, on resume, the run's own record)
    where it takes the source's tokenizer: the tokenizer learnt on text that went through it."""
    if theirs is None or spec.init_from is None or spec.init_from.tokenizer != "source":
        return spec
    ours, source = spec.data.pipeline, theirs.data.pipeline
    if ours == source:
        return spec
    if ours:
        raise UserError(
            f"data.pipeline [{', '.join(step_names(ours))}] differs from the pipeline of init_from's source "
            f"[{', '.join(step_names(source))}], whose tokenizer this run takes: drop data.pipeline to take the "
            "source's, or set init_from.tokenizer: own to train a tokenizer of this pipeline's text"
        )
    return spec.model_copy(update={"data": spec.data.model_copy(update={"pipeline": source})})


def start_from(model: nn.Module, source: Source) -> dict[str, Any]:
    """Loads the source's weights into `model` as init_from.convert allows; the record of it."""
    done = transfer_weights(model, source.loaded.model, source.given.convert, where=f"init_from {source.given.path}")
    return {**source.record(), **done.record()}


def config_note(record: dict[str, Any]) -> str:
    """config.yaml's first line: where the run's first weights came from."""
    said = record["model"] == f"step {record['step']}"
    step = f", step {record['step']}" if record.get("step") is not None and not said else ""
    return f"init_from: {record['checkpoint']} ({record['model']}{step}; {record['name']}, config_hash {record['config_hash']})"
