"""The Lightning task: the paper's loss, optimizer and schedule around a built model."""

import math
import time
from typing import Any

import lightning as L
import torch

from aiayn.blocks import TransformerGraph
from aiayn.builder.errors import UserError
from aiayn.builder.model.build import PAD_ID, build_model
from aiayn.builder.model.freeze import freeze
from aiayn.builder.model.loss import batch_loss, smoothed_nll_chunked, smoothed_nll_fusable
from aiayn.builder.registry import Registry
from aiayn.builder.train.attributes import log_every_n_steps
from aiayn.builder.train.board import BPB, PPL
from aiayn.builder.train.compiled import CUDA_GRAPH_MODES, CompiledAdam, StaticStepLoss, compile_mode
from aiayn.builder.train.finite import CHECKED_STEPS, first_non_finite, non_finite_message
from aiayn.builder.train.schedule import noam_lr
from aiayn.schemas.experiment import ExperimentSpec


def as_task(module: L.LightningModule) -> "TranslationTask":
    """A callback's `pl_module`, as the TranslationTask it is."""
    assert isinstance(module, TranslationTask), type(module)
    return module


class TranslationTask(L.LightningModule):
    """Trains `build_model(spec.model)` with label-smoothed cross-entropy, Adam and eq. (3).

    The checkpoint's hyperparameters hold the whole resolved experiment, so a checkpoint alone
    rebuilds the model: `TranslationTask(checkpoint["hyper_parameters"]["experiment"])`.
    """

    spec: ExperimentSpec
    model: TransformerGraph

    def __init__(self, experiment: dict[str, Any], plugins: dict[str, str] | None = None, *, registry: Registry) -> None:
        """`plugins`: {type: "distribution==version"} of the plugins' types the experiment uses
        (Registry.plugins_used), kept in the checkpoint to name a missing one; `registry`: the
        registrations the experiment is read with (not saved: a checkpoint holds data only)."""
        super().__init__()
        self.save_hyperparameters(ignore=["registry"], logger=False)  # the hparams tab gets Table 3's columns instead
        self.spec = ExperimentSpec.model_validate(experiment, context=registry.context)
        self.model = build_model(self.spec.model)
        freeze(self.model, self.spec.train.freeze)  # no gradients, no optimizer state
        if self.spec.train.activation_checkpointing:  # each layer recomputed in backward (blocks/stack.py)
            for stack in self.model.stacks().values():  # every graph names its stacks
                stack.checkpointing = True
        self.criterion = smoothed_nll_chunked
        self.fused = self.spec.train.fused_output_loss  # projection and loss together (projected_loss.py)
        self.compiled_loss: StaticStepLoss | None = None  # the training step's loss under static shapes
        self.compile_options: dict[str, Any] | None = None  # how train.compile compiled, once it has
        self.tokens_seen = 0  # source + target, this process, this session
        self.step_lr: float | None = None  # the learning rate of the newest optimizer step
        self._window: tuple[torch.Tensor | None, int] = (None, 0)  # training loss sum (on the device), target tokens
        self._tick: tuple[float, int] | None = None  # (time, tokens_seen) at the last logged step
        self._val_sums: list[torch.Tensor] = []
        self.validated_at: int | None = None  # the global step of the last validation
        self._step_start: tuple[int, torch.Tensor] | None = None  # (global step, RNG state) where the step began
        self._finite_checks = CHECKED_STEPS  # training steps left whose loss is checked (finite.py)

    # ---- compiling (train.compile, builder/train/compiled.py) ---------------------------------

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self.compile_for(self.trainer.strategy.root_device, say=self.trainer.is_global_zero)

    def compile_for(self, device: torch.device, *, say: bool = True, **options: Any) -> None:
        """Compiles as train.compile says, for a run on `device` (once); `options` go to
        torch.compile (a test's backend)."""
        mode, note = compile_mode(self.spec.train.compile, device)
        if mode is None or self.compile_options is not None:
            return
        if note and say:
            print(note, flush=True)
        self.compile_options = options or {"mode": mode}
        if self.spec.data.static_shapes is None:
            self.model.compile(dynamic=True, **self.compile_options)  # in place: the state_dict keeps its names
            self.criterion = torch.compile(smoothed_nll_fusable, dynamic=True, **self.compile_options)  # no (N, V) fp32 pass
            return
        eps = self.spec.train.label_smoothing
        self.compiled_loss = StaticStepLoss(self.model, eps=eps, pad_id=PAD_ID, fused=self.fused, **self.compile_options)

    # ---- training --------------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.compiled_loss is not None:
            loss, nll, _ = self.compiled_loss(batch)
        else:
            loss, nll, _ = batch_loss(
                self.model, batch, eps=self.spec.train.label_smoothing, pad_id=PAD_ID, loss=self.criterion, fused=self.fused
            )
        if self._finite_checks:  # the first steps of a session read their loss back once
            self._finite_checks -= 1
            self.check_finite(batch, loss)
        n = batch.n_tgt_tokens  # counted by the collator: no device sync
        self.tokens_seen += batch.n_src_tokens + batch.n_tgt_tokens
        total, targets = self._window
        self._window = (loss.detach() if total is None else total + loss.detach(), targets + n)
        if self.logging_step():
            now = time.perf_counter()
            self.log_dict({"loss/train": loss / n, "PPL/train": torch.exp(nll / n)})
            self.log("train/batch_tokens", float(batch.n_src_tokens + batch.n_tgt_tokens))
            if self._tick is not None:
                self.log("train/tokens_per_s", (self.tokens_seen - self._tick[1]) / max(now - self._tick[0], 1e-9))
            self._tick = (now, self.tokens_seen)
        return loss / n

    def check_finite(self, batch: Any, loss: torch.Tensor) -> None:
        """A UserError naming the block that computes NaN or inf where `loss` is not finite (on
        any rank: every rank stops)."""
        finite = bool(torch.isfinite(loss.detach()).all())
        if self.trainer.strategy.reduce_boolean_decision(finite, all=True):
            return
        step = self.global_step

        def again() -> None:
            batch_loss(
                self.model, batch, eps=self.spec.train.label_smoothing, pad_id=PAD_ID, loss=self.criterion, fused=self.fused
            )

        culprit = first_non_finite(self.model, again)
        raise UserError(non_finite_message(self.spec, step, float(loss.detach()), self.model, culprit))

    def take_window_loss(self) -> float | None:
        """The training loss per target token since the last call (one read from the device),
        or None where no batch has trained since."""
        total, targets = self._window
        self._window = (None, 0)
        return None if total is None or not targets else float(total) / targets

    def logging_step(self) -> bool:
        """Whether this optimizer step is logged: every trainer.log_every_n_steps-th. Only then
        is anything read back from the device."""
        return (self.global_step + 1) % log_every_n_steps(self.trainer) == 0

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        self.step_lr = optimizer.param_groups[0]["lr"]  # what this step applies (the schedule moves after it)
        if not self.logging_step():
            return  # the norm costs a pass over every gradient; only pay for it when logged
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        self.log("train/grad_norm", torch.nn.utils.get_total_norm(grads))
        self.log("lr", optimizer.param_groups[0]["lr"])

    def configure_optimizers(self) -> Any:
        adam, schedule = self.spec.train.optimizer, self.spec.train.lr_schedule
        settings: dict[str, Any] = dict(lr=1.0, betas=adam.betas, eps=adam.eps, weight_decay=adam.weight_decay)
        options = self.compile_options or {}
        trained = [p for p in self.model.parameters() if p.requires_grad]  # train.freeze's get no state
        if self.device.type == "cuda" and options.get("mode") in CUDA_GRAPH_MODES:  # the update replays as a graph too
            optimizer: torch.optim.Optimizer = CompiledAdam(trained, compile_options=options, **settings)
        else:  # fused: one kernel per step, not one per tensor
            optimizer = torch.optim.Adam(trained, **settings, fused=self.device.type in ("cpu", "cuda"))
        d_model = self.spec.model.d_model

        def lr(step: int) -> float:  # LambdaLR counts from 0; eq. (3) from 1
            return noam_lr(step + 1, d_model=d_model, warmup_steps=schedule.warmup_steps, factor=schedule.factor)

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ---- validation: loss and perplexity here, BLEU and pictures in callbacks -----------------

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, nll, count = batch_loss(
            self.model, batch, eps=self.spec.train.label_smoothing, pad_id=PAD_ID, loss=self.criterion, fused=self.fused
        )
        self._val_sums.append(torch.stack([loss.detach(), nll.detach(), count.to(loss.dtype)]))

    def on_validation_epoch_end(self) -> None:
        if not self._val_sums:
            return
        sums = self.all_gather(torch.stack(self._val_sums).sum(0))  # (world, 3) or (3,)
        assert isinstance(sums, torch.Tensor)
        loss, nll, count = sums.reshape(-1, 3).sum(0)
        self._val_sums.clear()
        n = count.clamp(min=1)
        # every rank has the sums (gathered), so every rank logs them: EarlyStopping reads them on each
        self.log("loss/valid", loss / n, sync_dist=True)
        self.log(PPL, torch.exp(nll / n), sync_dist=True)
        per_byte = getattr(getattr(self.trainer, "datamodule", None), "tokens_per_byte", {}).get("valid")  # a language model's
        if per_byte is not None:
            self.log(BPB, nll / n * per_byte / math.log(2), sync_dist=True)
        self.validated_at = self.global_step

    # ---- exact resume: the RNG streams (dropout) continue where they stopped -----------------

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # inside an optimizer step (Lightning's own save at SLURM's time-limit signal), the state where it began
        inside = self._step_start is not None and self._step_start[0] == self.global_step
        checkpoint["rng"] = {"torch": self._step_start[1] if inside else torch.get_rng_state()}  # type: ignore[index]

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Applied at the first batch: building the DataLoader iterator draws from the RNG too.
        self._resume_rng = checkpoint.get("rng", {}).get("torch")

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if getattr(self, "_resume_rng", None) is not None:
            torch.set_rng_state(self._resume_rng)
            self._resume_rng = None
        if self._step_start is None or self._step_start[0] != self.global_step:  # an optimizer step begins
            self._step_start = (self.global_step, torch.get_rng_state())
