"""A run's own logs as of the step its training starts from (rosetrain/train/step_logs.py):
a resumed run drops the lines of the steps it trains again, a fresh start all
of an earlier start's, and a log rosetrain did not record is never rewritten."""

from __future__ import annotations

import json
import logging

from rosetrain.core.io import output_lock, owned_names
from rosetrain.train.step_logs import FRONTIER_LOG, HELDOUT_LOG, start_step_logs


def write_logs(folder, steps, torn=False):
    """Both logs with lines at ``steps``, written as a run writes them (claimed first)."""
    start_step_logs(folder, None)  # names them in the marker before their first line
    for name in (FRONTIER_LOG, HELDOUT_LOG):
        text = "".join(json.dumps({"step": step, "n": i}) + "\n" for i, step in enumerate(steps))
        (folder / name).write_text(text + ('{"step": 9, "te' if torn else ""))  # killed mid-line


def steps_in(folder, name):
    return [json.loads(line)["step"] for line in (folder / name).read_text().splitlines()]


def test_a_resume_keeps_what_its_checkpoint_holds(tmp_path):
    with output_lock(tmp_path):
        write_logs(tmp_path, [0, 0, 1, 2, 3, 3, 4, 5, 6], torn=True)
        start_step_logs(tmp_path, 3)  # resumed from checkpoint-3
    # the filter's lines of step 3 are step 4's sampling, trained again; the evaluation
    # at step 3 came before checkpoint-3 was saved
    assert steps_in(tmp_path, FRONTIER_LOG) == [0, 0, 1, 2]
    assert steps_in(tmp_path, HELDOUT_LOG) == [0, 0, 1, 2, 3, 3]


def test_a_fresh_start_keeps_no_line_of_an_earlier_start(tmp_path, caplog):
    with output_lock(tmp_path):
        write_logs(tmp_path, [0, 1, 2])
        with caplog.at_level(logging.WARNING, logger="rosetrain.train"):
            start_step_logs(tmp_path, None)  # stopped before its first checkpoint: afresh
    assert (tmp_path / FRONTIER_LOG).read_text() == "" == (tmp_path / HELDOUT_LOG).read_text()
    assert "3 lines of steps of an earlier start dropped" in caplog.text
    assert {FRONTIER_LOG, HELDOUT_LOG} <= owned_names(tmp_path)


def test_a_log_the_marker_does_not_name_is_left_as_it_is(tmp_path, caplog):
    before = '{"step": 7}\n{"step": 8}\n'
    with output_lock(tmp_path):
        start_step_logs(tmp_path, None)  # an empty held folder: the marker names both logs
        (tmp_path / HELDOUT_LOG).write_text('{"step": 1}\n')
    (tmp_path / ".rosetrain.json").write_text(json.dumps({"written_by": "rosetrain", "files": []}))
    (tmp_path / FRONTIER_LOG).write_text(before)  # as a run before this record wrote it
    with output_lock(tmp_path), caplog.at_level(logging.WARNING, logger="rosetrain.train"):
        start_step_logs(tmp_path, 1)
    assert (tmp_path / FRONTIER_LOG).read_text() == before
    assert "written by an older rosetrain" in caplog.text
