"""The scores a finished run prints (`aiayn train`'s last line, `aiayn sweep`'s line a trial), for
each task: a sweep of language models printed `BLEU {None:.2f}`, a TypeError, before."""

from aiayn.builder.run.rundir import final_scores


def test_each_task_prints_what_it_is_scored_by():
    assert final_scores({"bleu": 27.123, "ppl": 5.678}) == "BLEU 27.12, PPL 5.68"
    assert final_scores({"bleu": None, "ppl": 80.0, "bpb": 1.4349}) == "PPL 80.00, 1.435 bits per byte"
    assert final_scores({"bleu": None, "ppl": 1.5, "parse_f1": 91.25}) == "bracketing F1 91.25 (EVALB's), PPL 1.50"
