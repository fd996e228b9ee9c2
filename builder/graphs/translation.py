"""What the two graphs share where they translate: the Translator, validation translations, the
final evaluation by BLEU (or, for a parser, EVALB's F1). Each imports what it uses when called:
the registry loads the graphs in every process, and a command such as `aiayn validate` needs none
of Lightning."""

from typing import Any

from aiayn.schemas.experiment import ExperimentSpec


def translator(loaded: Any) -> Any:
    """The Translator of a loaded translation model (decode's ForInference)."""
    from aiayn.builder.decode.translator import Translator

    return Translator(loaded.model, loaded.spec, loaded.src_tokenizer, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)


def validation_translations() -> Any:
    """The callback that logs validation translations and attention maps to TensorBoard."""
    from aiayn.builder.train.callbacks import ValidationTranslations

    return ValidationTranslations()


def translation_scores(spec: ExperimentSpec, model: Any, data: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """(metrics, hypotheses, references) of the validation split, translated as `aiayn evaluate` does."""
    from aiayn.builder.data.spec import gold_trees, split_texts
    from aiayn.builder.decode.evalb import tree_scores
    from aiayn.builder.decode.metrics import Scoring, evaluate_texts

    sources, refs, _ = split_texts(spec, "valid")
    metrics, hyps = evaluate_texts(
        model,
        data.src_tokenizer,
        data.tgt_tokenizer,
        sources,
        refs,
        spec.decode,
        reading=data.reading,
        scoring=Scoring.of(spec.data),
    )
    gold = gold_trees(spec.data, "valid")
    if gold is not None:  # a parsing experiment (`aiayn data wsj`): its trees scored as EVALB scores them, not by BLEU
        metrics = {**{k: v for k, v in metrics.items() if k not in ("bleu", "chrf", "signature")}, **tree_scores(gold, hyps)}
    return metrics, hyps, refs
