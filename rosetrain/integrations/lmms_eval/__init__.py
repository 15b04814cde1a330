"""A rosetrain split as an lmms-eval task, scored by rosetrain's own scorer.

``export_task`` writes a task folder for ``lmms-eval --include_path``;
``rosetrain.integrations.lmms_eval.task`` holds the functions the task's
``utils.py`` hands to lmms-eval; ``predictions_from_samples`` turns lmms-eval's
``--log_samples`` output back into a predictions file for ``rosetrain score``.
None of it imports lmms-eval, torch or transformers.
"""

from rosetrain.integrations.lmms_eval.export import export_task, predictions_from_samples

__all__ = ["export_task", "predictions_from_samples"]
