"""A trained model as a Python object, for a notebook or a script: `aiayn.load_run(path)` gives
a `Translator` whose `translate(lines)` gives what `aiayn translate` gives (the run's model,
averaged where it averaged; its tokenizers; its text pipeline on the input; its decode settings,
each overridable by name), with n-best lists, scores and alignments on request, and whose
`score(sources, targets)` gives what `aiayn score` gives."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from aiayn.blocks import TransformerModel
from aiayn.builder.data.text import TextPipeline, pipelines_of
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.device import resolve_device
from aiayn.builder.decode.forced import alignment_layers, score_ids
from aiayn.builder.decode.inference import Inference
from aiayn.builder.decode.interrupt import check
from aiayn.builder.decode.mbr import make_utility, mbr_choice
from aiayn.builder.decode.options import decoding_of
from aiayn.builder.decode.records import Score, Translation, scored_record, translation_record
from aiayn.builder.decode.sampling import MAX_SEED
from aiayn.builder.decode.search import Hypothesis
from aiayn.builder.decode.strategy import BeamSearch, Decoding, Strategy, unique_texts
from aiayn.builder.decode.translate import (
    check_lengths,
    encode_sources,
    output_start,
    token_rules,
    translate_hypotheses,
    translate_texts,
)
from aiayn.builder.errors import UserError, bool_argument, bool_arguments, described, strings_argument
from aiayn.builder.registry import registry_of
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.decode import DecodeSpec
from aiayn.schemas.experiment import ExperimentSpec

Progress = Callable[[int], None] | None


@dataclass(repr=False)
class Translator(Inference):
    """A trained model with its tokenizers and its run's settings (`aiayn.load_run` makes one).
    Decode settings (beam, alpha, length_penalty, max_len_b, max_tokens, max_input_len) are the
    run's, each overridable by keyword in every method.

    :param model: the model (an encoder-decoder, a decoder-only translation model, or an
        ensemble), in eval mode
    :param spec: the run's ExperimentSpec
    :param src_tokenizer: the source side's tokenizer
    :param tgt_tokenizer: the target side's (the same object for a shared vocabulary)
    :param checkpoint: the file the weights came from
    :param what: which model that is: "step 300", "the mean of ..." """

    model: TransformerModel
    spec: ExperimentSpec
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    checkpoint: Path
    what: str

    task = "translation"
    kind = "a translation model"
    endpoints = ("/translate", "/score")
    verbs = frozenset({"translate", "score", "evaluate"})
    reads_sources = True

    @property
    def input_tokenizer(self) -> Tokenizer:
        return self.src_tokenizer

    @property
    def output_tokenizer(self) -> Tokenizer:
        return self.tgt_tokenizer

    def refusal(self, verb: str, path: Path | str) -> str:
        """Why a translation model does not take `verb` (generate, score --text), and what to use instead.

        :param verb: the verb refused
        :param path: the model, as the command named it"""
        if verb == "score --text":
            return f"{path} is a translation model: score its pairs with --src and --tgt"
        if verb == "generate":
            return f"{path} is a translation model; aiayn generate continues a language model's text: use aiayn translate"
        return super().refusal(verb, path)

    def __repr__(self) -> str:
        params = sum(p.numel() for p in self.model.parameters())
        device = next(self.model.parameters()).device
        return f"Translator({str(self.checkpoint)!r}, {self.what}, {params:,} parameters, on {device})"

    @property
    def pipelines(self) -> tuple[TextPipeline, TextPipeline] | None:
        """The run's text pipeline (source's, target's), None where it has none."""
        return pipelines_of(self.spec)

    def decode_spec(self, **overrides: Any) -> DecodeSpec:
        """The run's decode settings with `overrides`, checked.

        :param overrides: decode settings by name (beam=5, alpha=1.0, length_penalty="fairseq", ...)
        :raises UserError: a setting that does not validate, by name"""
        try:
            given = {**self.spec.decode.model_dump(), **overrides}
            return DecodeSpec.model_validate(given, context=registry_of(self.spec).context)
        except ValidationError as e:
            raise UserError("decode: " + "; ".join(format_validation_error(e, root=DecodeSpec))) from None

    def translate(
        self,
        lines: Sequence[str] | str,
        *,
        n_best: int | None = None,
        with_scores: bool = False,
        alignments: bool = False,
        alignment_layer: int | None = None,
        detokenize: bool = False,
        decoding: Decoding | None = None,
        on_batch: Progress = None,
        on_choice: Progress = None,
        **options: Any,
    ) -> list[str] | list[list[str]] | list[list[Translation]]:
        """Each line's translation as `aiayn translate` writes it.

        :param lines: the source lines (a str: that one line)
        :param n_best: each line's k best translations, best first, a list per line (k <= the beam; sampled, any k)
        :param with_scores: `Translation` records (text, tokens, ids, score, log_prob, token_log_probs) instead of strings
        :param alignments: records with word pairs from the cross-attention (Pharaoh i-j)
        :param alignment_layer: the decoder layer that aligns (default: the penultimate of more than two, else the last)
        :param detokenize: plain text from a run trained on tokenized text (Moses' rules)
        :param decoding: how the candidates are found and chosen, as one value (a `Decoding`: its strategy, n_best,
            unique, MBR choice and seed), instead of the options below that build one
        :param on_batch: called with the number of lines of each batch decoded (a progress bar)
        :param on_choice: called with 1 after each line MBR chose for (a progress bar)
        :param options: the run's decode settings to override (beam=5, alpha=1.0, length_penalty="fairseq", ...), and
            what builds the decoding: `sampling` (k samples of each line instead of the search, sorted by score);
            what shapes it: `temperature` (divide the logits by it, default 1), `top_k` (the k most probable tokens;
            0: no limit), `top_p` (the fewest tokens whose probability reaches p; 1: no limit), `epsilon` (the tokens
            of probability >= epsilon; 0: no limit), `filters` (a plugin's sampling filters after those, in order,
            as YAML writes them: [{"type": "min_p", "min_p": 0.1}], or a type's name); `seed` (the sampler's: the
            same seed, the same samples); `unique` (each text once in a line's list; fewer may stay); `mbr`
            (minimum-Bayes-risk decoding with that utility, "chrf", "bleu" or a plugin's, among n_best >= 2
            candidates), `mbr_weights` ("uniform", or "model": each candidate weighted by P(Y | X)),
            `mbr_references` (draw N samples as the references; default: the candidates)
        :returns: a string a line; with `n_best`, a list a line; with scores or alignments, records (MBR's: `utility`)"""
        lines = strings_argument(lines, "lines", one=True)
        with_scores, alignments, detokenize = bool_arguments(
            with_scores=with_scores, alignments=alignments, detokenize=detokenize
        )
        decoding, settings = decoding_of(decoding, n_best, options, registry_of(self.spec), self.decode_spec)
        lines, undo = self._through_pipeline(lines, detokenize, alignments)
        if n_best is None and not (with_scores or alignments) and decoding.strategy == BeamSearch() and decoding.mbr is None:
            return self._beam_best(lines, settings, undo, on_batch)
        ids, found, texts, utilities = self.decode_lines(lines, settings, decoding, on_batch=on_batch, on_choice=on_choice)
        texts = texts if undo is None else [[undo(t) for t in group] for group in texts]
        if not (with_scores or alignments):
            return [group[0] for group in texts] if decoding.mbr is not None or n_best is None else texts
        return self._records(ids, found, texts, settings, alignments, alignment_layer, utilities)

    def _beam_best(self, lines: Sequence[str], settings: DecodeSpec, undo: Any, on_batch: Progress) -> list[str]:
        """Each line's best translation by beam search (validation's path), undone by `undo` (detokenizing) where given."""
        src, tgt = self.src_tokenizer, self.tgt_tokenizer
        hyps = translate_texts(self.model, src, tgt, list(lines), settings, on_batch=on_batch, what="input")
        return hyps if undo is None else [undo(h) for h in hyps]

    def decode_lines(
        self,
        lines: Sequence[str],
        settings: DecodeSpec,
        decoding: Decoding,
        *,
        on_batch: Progress = None,
        on_choice: Progress = None,
    ) -> tuple[list[list[int]], list[list[Hypothesis]], list[list[str]], list[float] | None]:
        """The core of `translate`, on lines through the run's pipeline already.

        :param lines: the source lines, through the run's text pipeline
        :param settings: checked decode settings (`decode_spec`)
        :param decoding: how the candidates are found and chosen (a `Decoding`)
        :param on_batch: called with the number of lines of each batch decoded
        :param on_choice: called with 1 after each line MBR chose for
        :returns: (source ids, each line's hypotheses, their texts, the MBR choices' expected utilities)"""
        decoding = decoding.resolved(settings, registry_of(self.spec))
        assert decoding.strategy is not None
        ids = encode_sources(self.model, self.src_tokenizer, lines, settings, "input")
        found, texts = self._candidates(ids, settings, decoding.strategy, decoding.n_best, decoding.seed, on_batch)
        if decoding.unique:
            found, texts = unique_texts(found, texts)
        if decoding.mbr is None:
            return ids, found, texts, None
        return ids, *self._mbr(ids, found, texts, settings, decoding, on_choice)

    def _through_pipeline(
        self, lines: Sequence[str], detokenize: bool, alignments: bool
    ) -> tuple[Sequence[str], Callable[[str], str] | None]:
        """The lines through the run's source pipeline, and what undoes its target's tokenization (None: nothing to undo)."""
        pipelines = self._pipelines_for(detokenize, alignments)
        if pipelines is None:
            return lines, None
        return pipelines[0].lines(lines), pipelines[1].detokenize if detokenize else None

    def _pipelines_for(self, detokenize: bool, alignments: bool) -> tuple[TextPipeline, TextPipeline] | None:
        """The run's text pipelines, checked to undo what `detokenize` asks for."""
        if detokenize and alignments:
            raise UserError("alignments: they count the words of the run's tokenized output; drop detokenize")
        pipelines = self.pipelines
        if detokenize and (pipelines is None or pipelines[1].tokenizer is None):
            raise UserError("detokenize: this run was trained on untokenized text (data.pipeline has no moses_tokenize)")
        return pipelines

    def _candidates(
        self, ids: list[list[int]], settings: DecodeSpec, strategy: Strategy, k: int, seed: int, on_batch: Progress
    ) -> tuple[list[list[Hypothesis]], list[list[str]]]:
        """Each source's k candidates as `strategy` finds them (drawing from `seed` where it draws), and their texts."""
        found = translate_hypotheses(
            self.model,
            ids,
            settings,
            bos_id=output_start(self.model, self.tgt_tokenizer),
            eos_id=self.tgt_tokenizer.eos_id,
            n_best=k,
            on_batch=on_batch,
            rules=token_rules(settings, self.tgt_tokenizer),
            strategy=strategy,
            seed=seed,
        )
        return found, [self.tgt_tokenizer.decode_batch([h.ids for h in hyps]) for hyps in found]

    def _mbr(
        self,
        ids: list[list[int]],
        found: list[list[Hypothesis]],
        texts: list[list[str]],
        settings: DecodeSpec,
        decoding: Decoding,
        on_choice: Progress = None,
    ) -> tuple[list[list[Hypothesis]], list[list[str]], list[float]]:
        """Each source's MBR choice among its candidates, and its expected utility."""
        chooser = decoding.mbr
        assert chooser is not None
        references: tuple[list[list[Hypothesis]], list[list[str]]] = (found, texts)
        if chooser.references is not None:  # pseudo-references drawn apart from the candidates
            seed = (decoding.seed + 1) % (MAX_SEED + 1)
            references = self._candidates(ids, settings, decoding.references(), chooser.references, seed, None)
        utility, chosen, values = make_utility(chooser.utility, registry_of(self.spec)), [], []
        for hyps, group, ref_hyps, refs, source in zip(found, texts, *references, ids):
            check()  # a watching caller that wants none of it (interrupt.py) stops it here
            if not source:  # a blank line: its one empty translation
                chosen.append(0)
                values.append(0.0)
                continue
            best, value = mbr_choice(utility, group, refs, [h.log_prob for h in ref_hyps], chooser.weights)
            chosen.append(best)
            values.append(value)
            if on_choice is not None:
                on_choice(1)
        return [[h[i]] for h, i in zip(found, chosen)], [[t[i]] for t, i in zip(texts, chosen)], values

    def _records(
        self,
        ids: list[list[int]],
        found: list[list[Hypothesis]],
        texts: list[list[str]],
        settings: DecodeSpec,
        align: bool,
        layer: int | None,
        utilities: list[float] | None = None,
    ) -> list[list[Translation]]:
        """Each hypothesis's Translation: its forced decoding gives the per-token numbers and the alignment."""
        flat = [(i, h) for i, hyps in enumerate(found) for h in hyps if ids[i]]
        scored = self._scored(
            [ids[i] for i, _ in flat], [h.ids for _, h in flat], settings, align, layer, ended=[h.ended for _, h in flat]
        )
        forced = iter(scored)  # in the order of `flat`: a blank source's hypothesis has none
        return [
            [
                translation_record(
                    h, text, next(forced) if ids[i] else None, align=align, utility=None if utilities is None else utilities[i]
                )
                for h, text in zip(hyps, group)
            ]
            for i, (hyps, group) in enumerate(zip(found, texts))
        ]

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        *,
        alignments: bool = False,
        alignment_layer: int | None = None,
        on_batch: Progress = None,
        **decode: Any,
    ) -> list[Score]:
        """Forced decoding of each target given its source, as `aiayn score` does, batched by
        max_tokens; both sides go through the run's text pipeline. `decode` overrides the run's
        decode settings by name (the length penalty the score is divided by).

        :param sources: the source lines
        :param targets: one target a source
        :param alignments: each Score with its word alignment (Pharaoh i-j)
        :param alignment_layer: the decoder layer that aligns (default: as `translate`)
        :param on_batch: called with the number of pairs of each batch scored
        :returns: a `Score` per pair: score (the value the beam search would rank that target by),
            log_prob, length, token_log_probs, the alignment where asked for"""
        sources = strings_argument(sources, "sources")
        targets = strings_argument(targets, "targets")
        alignments = bool_argument(alignments, "alignments")
        if len(sources) != len(targets):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets: give one target per source")
        blank = next((i for i, line in enumerate(sources) if not line.strip()), None)
        if blank is not None:
            raise UserError(f"sources[{blank}] is blank: there is nothing to score its target against")
        settings = self.decode_spec(**decode)
        pipelines = self.pipelines
        if pipelines is not None:
            sources, targets = pipelines[0].lines(sources), pipelines[1].lines(targets)
        src_ids = encode_sources(self.model, self.src_tokenizer, sources, settings, "source")
        tgt_ids = self.tgt_tokenizer.encode_batch(targets)
        check_lengths(self.model, [len(t) + 1 for t in tgt_ids], "target")
        return self._scored(src_ids, tgt_ids, settings, alignments, alignment_layer, on_batch=on_batch)

    def _scored(
        self,
        src_ids: list[list[int]],
        tgt_ids: list[list[int]],
        settings: DecodeSpec,
        align: bool,
        layer: int | None,
        *,
        ended: list[bool] | None = None,
        on_batch: Progress = None,
    ) -> list[Score]:
        if align:
            check_alignment_layer(layer, alignment_layers(self.model))
        scored = score_ids(
            self.model,
            src_ids,
            tgt_ids,
            settings,
            bos_id=output_start(self.model, self.tgt_tokenizer),
            eos_id=self.tgt_tokenizer.eos_id,
            ended=ended,
            align=align,
            alignment_layer=layer,
            on_batch=on_batch,
            rules=token_rules(settings, self.tgt_tokenizer),
        )
        source_words = [self.src_tokenizer.word_index(s) for s in src_ids] if align else [None] * len(src_ids)
        return [scored_record(t, s, self.tgt_tokenizer, w) for t, s, w in zip(tgt_ids, scored, source_words)]

    def to(self, device: str | torch.device) -> "Translator":
        """The model moved to `device`; returns the Translator.

        :param device: "cpu", "cuda", "cuda:1", or a torch.device"""
        self.model.to(resolve_device(device))
        return self


def check_alignment_layer(layer: object, n_layers: int, name: str = "alignment_layer") -> None:
    if layer is None:
        return
    if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n_layers:
        raise UserError(f"{name}: the decoder's layers are 0 to {n_layers - 1}, got {described(layer)}")
