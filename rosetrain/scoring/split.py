"""Scoring a whole split from its metadata files, in several processes.

``rosetrain score`` cuts the split's files into chunks of whole lines. Each
chunk is read (only the fields the scorer needs), checked, scored against the
predictions and encoded (one JSON line per item) by one process, which keeps
only the lines and the summary's columns of its rows, never the row dicts,
and puts the lines in memory it shares with the main process, as one text
(``MappedLines``). The chunks come back in file order, so the run writes the
same bytes whatever the number of processes.

Any problem with the split (a bad line, a record that contradicts itself, an
item id given twice) sends the run to ``load_split``'s full reading, whose
error names the file, line and field.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

# the submodule itself: `concurrent.futures` alone names it only once something imported it
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from rosetrain.core.cpus import ResultMemory, can_fork, forked_pool
from rosetrain.core.errors import RosetrainError
from rosetrain.core.jsonio import jsonl_line
from rosetrain.core.memo import clear_memos
from rosetrain.data.release import (
    CHUNK_BYTES,
    Chunk,
    ImagesDigest,
    files_fingerprint,
    line_chunks,
    load_split,
    read_chunk,
    split_files,
    split_fingerprint,
)
from rosetrain.scoring.batch import score_prediction
from rosetrain.scoring.frame import LABELS_OF, NUMBERS_OF, Frame, concat
from rosetrain.scoring.gold import GOLD_FIELDS, Gold
from rosetrain.scoring.lines import MappedLines
from rosetrain.scoring.official_files import Expected, expected_items


@dataclasses.dataclass
class ScoredSplit:
    """A split's scored rows: the expected items (every gold item), the
    summary's columns of the scored rows and their JSON lines, in split order."""

    expected: Expected
    frame: Frame
    lines: Sequence[bytes]  # a list, or MappedLines from the worker processes
    fingerprint: str = ""  # split_fingerprint of the files scored


PARALLEL_BYTES = 16 << 20  # a smaller split is scored sooner than worker processes start


# What the chunks are scored against (predictions, model): set before the
# worker processes fork, so they inherit the predictions instead of a copy.
_JOB: tuple[Mapping[str, Mapping], str | None, str] | None = None  # ..., and the split's name
_RESULTS: ResultMemory | None = None  # where the workers put the scored chunks


def score_split(
    root: str | os.PathLike,
    split: str,
    bridges: bool | None,
    predictions: Mapping[str, Mapping],
    model: str | None = None,
    num_proc: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
) -> ScoredSplit:
    """Score every gold item of the split that has a prediction (``check_coverage``
    says whether that is all of them), in ``num_proc`` processes that
    take chunks of about ``chunk_bytes`` of the metadata files (in this process
    alone when the files hold less than ``PARALLEL_BYTES``)."""
    paths = split_files(root, split, bridges)
    parallel = num_proc > 1 and can_fork() and sum(p.stat().st_size for p in paths) >= PARALLEL_BYTES
    chunks = line_chunks(paths, chunk_bytes if parallel else None)
    try:
        scored = _score_chunks(chunks, predictions, model, num_proc, (root, split, bridges))
        ids = scored.expected["item_id"]
        if len(set(ids)) != len(ids):
            raise RosetrainError("an item id given twice")
    except BrokenProcessPool:
        raise RosetrainError(
            "a scoring worker process died (killed, or out of memory?); run again, "
            "with num_proc=1 to score in this process alone",
            argument="num_proc",
        ) from None
    except RosetrainError:  # read it in full: that error names the file, line and field
        golds = load_split(root, split, bridges=bridges, build=Gold)
        scored = _score_golds(golds, predictions, model)
        scored.fingerprint = split_fingerprint(root, split, bridges)
    clear_memos()  # this run's parsed cells and labels
    return scored


def _score_chunks(
    chunks: Sequence[Chunk],
    predictions: Mapping[str, Mapping],
    model: str | None,
    num_proc: int,
    split: tuple[str | os.PathLike, str, bool | None],
) -> ScoredSplit:
    """The chunks scored here (``num_proc`` 1) or in ``num_proc`` forked processes,
    which send each chunk back as they finish it, and the split's fingerprint
    (one of them hashes the files meanwhile). This process only gathers:
    scoring here too would keep the gathering thread from the interpreter lock,
    and a worker stalls until its result is read."""
    global _JOB
    _JOB = (predictions, model, split[1])
    processes = min(num_proc, len(chunks))
    try:
        if processes < 2:
            parts = [_score_chunk(chunk) for chunk in chunks] or [_score_golds([], predictions, model)]
            lines: Sequence[bytes] = [line for part in parts for line in part.lines]
            fingerprint = split_fingerprint(*split)
        else:
            parts, lines, fingerprint = _in_workers(chunks, processes, split)
    finally:
        _JOB = None
    return ScoredSplit(
        expected={field: [v for part in parts for v in part.expected[field]] for field in parts[0].expected},
        frame=concat([part.frame for part in parts]),
        lines=lines,
        fingerprint=fingerprint,
    )


def _in_workers(
    chunks: Sequence[Chunk], processes: int, split: tuple[str | os.PathLike, str, bool | None]
) -> tuple[list[ScoredSplit], MappedLines, str]:
    """The chunks scored by ``processes`` forked workers, in order (without
    their lines), the lines, and the split's fingerprint: one worker hashes the
    files meanwhile, and this process the images their lines name, as the
    chunks come (the workers read the names anyway: read again for the
    fingerprint, they cost 0.14 CPU s at 51,000 items). A worker that dies
    (killed, out of memory) fails the run at once, and an interrupt cancels the
    chunks not yet begun."""
    global _RESULTS
    results = _RESULTS = ResultMemory()
    workers, broken = forked_pool(processes), False
    try:
        hashed = workers.submit(files_fingerprint, split_files(*split))
        parts, starts, ends, images = [], [], [], ImagesDigest()
        # read as each is scored, in order (the pipe carries only their places)
        for chunk, (place, (text_start, _)) in zip(chunks, workers.map(_scored_chunk_places, chunks)):
            part, lengths, names = results.take(place)
            parts.append(part)
            ends.append(text_start + np.cumsum(lengths))
            starts.append(ends[-1] - lengths)
            images.add(chunk.path.parent, names)
        lines = MappedLines(results.mapped(), np.concatenate(starts), np.concatenate(ends))
        return parts, lines, images.joined(hashed.result())
    except BrokenProcessPool:
        broken = True
        raise
    finally:
        # a broken pool fails the chunks not begun itself: cancelling them too
        # races with it, and its thread prints an InvalidStateError
        workers.shutdown(wait=True, cancel_futures=not broken)
        results.close()  # the map keeps the memory for as long as it lives
        _RESULTS = None


def _scored_chunk_places(chunk: Chunk) -> tuple[tuple[int, int], tuple[int, int]]:
    """Score the chunk; the places of what came of it (without its lines, the
    lengths of its lines, its image names) and of its lines' text."""
    assert _RESULTS is not None
    names: list[str] = []
    part = _score_chunk(chunk, names)
    text = _RESULTS.put_bytes(b"".join(part.lines))
    lengths = np.fromiter(map(len, part.lines), dtype=np.int64, count=len(part.lines))
    part.lines = []
    return _RESULTS.put((part, lengths, names)), text


def _score_chunk(chunk: Chunk, images: list[str] | None = None) -> ScoredSplit:
    assert _JOB is not None
    predictions, model, split = _JOB
    golds = read_chunk(chunk, GOLD_FIELDS, build=Gold, split=split, images=images)
    return _score_golds(golds, predictions, model)


def _score_golds(golds: Sequence[Gold], predictions: Mapping[str, Mapping], model: str | None) -> ScoredSplit:
    """Score the golds that have a prediction, keeping each row's line and columns."""
    lines, numbers, labels = [], [], []
    for gold in golds:
        prediction = predictions.get(gold.item_id)
        if prediction is not None:
            row = score_prediction(gold, prediction, model)
            lines.append(jsonl_line(row))
            numbers.append(NUMBERS_OF(row))
            labels.append(LABELS_OF(row))
    return ScoredSplit(expected_items(golds), Frame.from_tuples(numbers, labels), lines)
