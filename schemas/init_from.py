"""Start a run from trained weights (fairseq's --finetune-from-model, OpenNMT-py's train_from):
a new run at step 0, with a fresh optimizer and schedule, whose model begins as another run's.

Every parameter must match the source's by name and shape. What may differ is named in
`convert`, each a conversion with its formula:
  kv_heads    grouped-query uptraining (Ainslie et al. 2023, sec. 2.1): an attention with fewer
              K/V heads than the source's takes the mean of each group's K and V heads (the
              heads whose query heads the new head serves)
  layers      a stack with fewer or more layers: the first layers are copied, new ones are
              initialised as usual (and listed)
  new_blocks  parameters the source has not (a block added, QK-norm, a plugin's): initialised as
              usual (and listed)
"""

from typing import Any, Literal

from pydantic import Field, model_validator

from aiayn.schemas._base import FieldError, Spec

Conversion = Literal["kv_heads", "layers", "new_blocks"]
CONVERSIONS: tuple[Conversion, ...] = ("kv_heads", "layers", "new_blocks")


class InitFromSpec(Spec):
    """`init_from: runs/base/version_0` (a run directory: its model as the run defines it,
    averaged where it averaged; or a .ckpt file) or the mapping below."""

    path: str = Field(min_length=1)  # relative to the directory training starts in
    # source: the source run's tokenizer(s) and text pipeline (data.pipeline), so its ids mean
    # what its embeddings learnt; own: this experiment's, trained on its data as usual
    tokenizer: Literal["source", "own"] = "source"
    convert: tuple[Conversion, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _a_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _once_each(self) -> "InitFromSpec":
        twice = sorted({c for c in self.convert if self.convert.count(c) > 1})
        if twice:
            raise FieldError("convert", f"names {twice[0]} twice; name each conversion once")
        return self
