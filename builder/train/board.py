"""What a run writes for TensorBoard, named so that it opens on what a researcher looks for.

TensorBoard sorts tag groups by name, upper case first: `BLEU/`, `PPL/`, `loss/` and `lr` come
before the diagnostics (`train/`) and the pictures and samples (`valid/`). The HParams tab gets
Table 3's columns in Table 3's order (TensorBoard orders hyperparameters by name, so the names
carry the position and the display names the column), integers as integers (TensorBoard prints
every number to five digits, so integers are written as text), and its metrics are the scalar
tags themselves: BLEU/valid is the whole validation split, written once at the end; no
placeholder at step 0.
"""

import json
import os
import time
from collections.abc import Mapping
from contextlib import closing
from typing import Any

import lightning.pytorch as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from torch.utils.tensorboard.writer import FileWriter

from aiayn.builder.model.size import count_params
from aiayn.builder.model.summary import paper_columns
from aiayn.builder.run.study import ENV
from aiayn.schemas.experiment import ExperimentSpec

BLEU, PPL = "BLEU/valid", "PPL/valid"  # the whole validation split: the numbers of results.json
BPB = "bpb/valid"  # a language model's bits per byte of the validation text (results.json's bpb)


def bleu_tag(n_sentences: int, n_split: int) -> str:
    """BLEU/valid for the whole split, BLEU/valid.first100 for its first 100 sentences."""
    return BLEU if n_sentences >= n_split else f"{BLEU}.first{n_sentences}"


class Board(TensorBoardLogger):
    """Lightning's TensorBoard logger, with the x axis counting optimizer steps done, as the
    console and the checkpoints' names do, and without the `epoch` chart it adds to every logged
    step (one endless epoch here).

    The step is the trainer's `global_step` (`trainer`, set by build_trainer), not the one
    Lightning passes: that is the 0-based index of the step whose numbers these are, except after a
    resume from a checkpoint written at an epoch's end, where it runs one step ahead."""

    trainer: "L.Trainer | None" = None

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if step is not None:
            step = self.trainer.global_step if self.trainer else step + 1
        super().log_metrics({k: v for k, v in metrics.items() if k != "epoch"}, step)

    @rank_zero_only
    def log_final(self, metrics: dict[str, float], step: int) -> None:
        """Numbers measured after `step` optimizer steps."""
        super().log_metrics(metrics, step)

    @rank_zero_only
    def start_session(self, spec: ExperimentSpec, n_valid: int) -> None:
        """The HParams tab's row for this run: Table 3's columns, then the metrics' tags."""
        columns = dict(paper_columns(spec))
        columns.update(params=count_params(spec.model), name=spec.name, seed=spec.train.seed)
        columns.update(json.loads(os.environ.get(ENV) or "{}").get("params", {}))  # a search trial: what it tries
        columns = {k: v for k, v in columns.items() if v is not None}
        names = {k: f"{i:02d} {k}" for i, k in enumerate(columns)}  # sorted by name = Table 3's order
        infos = [api_pb2.HParamInfo(name=names[k], display_name=k, type=_type(v)) for k, v in columns.items()]
        metrics = [
            api_pb2.MetricInfo(name=api_pb2.MetricName(tag=PPL), display_name=f"PPL (valid, {n_valid} sentences)"),
            api_pb2.MetricInfo(name=api_pb2.MetricName(tag=BLEU), display_name=f"BLEU (valid, {n_valid} sentences)"),
        ]
        experiment = api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics, time_created_secs=time.time())
        start = plugin_data_pb2.SessionStartInfo(group_name=spec.name, start_time_secs=time.time())
        for k, v in columns.items():
            value = start.hparams[names[k]]
            if isinstance(v, bool):
                value.bool_value = v
            elif isinstance(v, float):
                value.number_value = v
            else:
                value.string_value = str(v)  # integers too: TensorBoard shows numbers as 512.00
        self._write(
            _summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            _summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
        )

    @rank_zero_only
    def log_model(self, spec: ExperimentSpec, step: int) -> None:
        """The model drawn from its config (`aiayn show --figure`), as the image `model`."""
        from aiayn.builder.model.figure import draw, layout  # matplotlib

        self.experiment.add_figure("model", draw(layout(spec.model, title=spec.name)), global_step=step, close=False)  # no pyplot

    @rank_zero_only
    def end_session(self, status: str) -> None:
        """status: success, failure or running (stopped, to be resumed)."""
        status_enum = {"success": api_pb2.STATUS_SUCCESS, "failure": api_pb2.STATUS_FAILURE}.get(status, api_pb2.STATUS_RUNNING)
        end = plugin_data_pb2.SessionEndInfo(status=status_enum, end_time_secs=time.time())
        self._write(_summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))

    def _write(self, *summaries: Summary) -> None:
        """Into an events file of their own: Lightning closes its writer when fit returns."""
        with closing(FileWriter(self.log_dir)) as writer:
            for summary in summaries:
                writer.add_summary(summary)


def _summary(tag: str, **content: Any) -> Summary:
    """One hparams-plugin record, as TensorBoard's reader expects it."""
    data = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
    plugin = SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString())
    return Summary(value=[Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin))])


def _type(v: Any) -> int:
    if isinstance(v, bool):
        return api_pb2.DATA_TYPE_BOOL
    return api_pb2.DATA_TYPE_FLOAT64 if isinstance(v, float) else api_pb2.DATA_TYPE_STRING
