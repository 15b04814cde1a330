"""The trainer's periodic logs as one readable line each.

transformers prints every log as a dict of string fractions (``{'loss': '0.192',
'grad_norm': '0.4989', ...}``), through its progress bar, or through its printer
when the bar is off (``--quiet``). rosetrain replaces both with a line in the
style of its own output (``step 50/2000  loss 0.1920  grad norm 0.499  lr 2.45e-04
...``). Every key still reaches the ``report_to`` trackers and trainer_state.json;
the line keeps the ones a person watches. The held-out evaluation prints its own
line (``held-out evaluation at step N: ...``) and the command its summary, so
their logs are not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from transformers import PrinterCallback, ProgressCallback

# (log key, label, format), in the order they print
SHOWN: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("loss", "loss", "{:.4f}".format),
    ("reward", "reward", "{:.3f}".format),
    ("pass/action", "action PASS", lambda v: f"{100 * v:.1f}%"),
    ("mean_token_accuracy", "token accuracy", lambda v: f"{100 * v:.1f}%"),
    ("grad_norm", "grad norm", "{:.3g}".format),
    ("learning_rate", "lr", "{:.2e}".format),
)
SUMMARY_KEY = "train_runtime"  # the end-of-training log: the command's summary line says it


def log_line(logs: Mapping[str, Any], step: int, max_steps: int) -> str | None:
    """One line for a periodic log; None for the logs printed elsewhere."""
    if SUMMARY_KEY in logs or any(key.startswith("eval_") for key in logs):
        return None
    shown = [
        f"{label} {fmt(float(logs[key]))}"
        for key, label, fmt in SHOWN
        if isinstance(logs.get(key), (int, float)) and not isinstance(logs.get(key), bool)
    ]
    return "  ".join([f"step {step}/{max_steps}" if max_steps else f"step {step}", *shown])


class LineProgressCallback(ProgressCallback):
    """transformers' training bar, with each log written above it as one line."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None:
            line = log_line(logs or {}, state.global_step, state.max_steps)
            if line:
                self.training_bar.write(line)


class LinePrinterCallback(PrinterCallback):
    """No bar (``--quiet``): each log printed as one line."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero:
            line = log_line(logs or {}, state.global_step, state.max_steps)
            if line:
                print(line, flush=True)


def use_log_lines(trainer: Any) -> None:
    """Swap the trainer's dict-printing callback for the line-printing one."""
    quiet = bool(getattr(trainer.args, "disable_tqdm", False))
    trainer.pop_callback(ProgressCallback)
    trainer.pop_callback(PrinterCallback)
    trainer.add_callback(LinePrinterCallback if quiet else LineProgressCallback)
