"""The one ROSE scorer: strict parsing, per-item scores and diagnostics, summaries.

GRPO rewards, ``rosetrain score``/``eval``/``compare``, the demo and the
benchmarks all call these functions; nothing else parses answers.

Everything follows the official ROSE v0.1 evaluator: its grammar, its per-item
fields and conventions, its summary keys and files (rosetrain's own figures
and fields come after, under their own names).

- ``parse_answer(text, mode) -> ParsedAnswer`` (grammar.py)
- ``prepare_gold(record_or_hf_row) -> Gold`` (gold.py): sets built once
- ``score_item(gold, raw_text) -> dict`` (item.py): one per-item row
- ``score_predictions`` (batch.py), ``score_split`` (split.py): a whole split
- ``summarize(golds, results) -> dict`` (summaries.py): evaluation_summary.json
  and the official analyses, every summary in one pass (metrics.py: the main
  one; analyses.py: the bridges and scene consistency)
- ``write_scored_run`` (writer.py): every file, from the summaries
- ``official.py`` / ``official_files.py``: the official figures and files
"""

from rosetrain.scoring.batch import score_predictions
from rosetrain.scoring.fields import EXTRA_FIELDS, OFFICIAL_FIELDS, RESULT_FIELDS
from rosetrain.scoring.files import PER_ITEM_FILE, SUMMARY_FILE, read_scored_rows
from rosetrain.scoring.gold import Gold, normalize_region_case, prepare_gold
from rosetrain.scoring.grammar import ParsedAnswer, parse_answer
from rosetrain.scoring.item import score_item, score_many, score_parsed
from rosetrain.scoring.summaries import summarize
from rosetrain.scoring.tables import csv_tables, summary_markdown
from rosetrain.scoring.writer import write_scored_run

__all__ = [
    "EXTRA_FIELDS",
    "Gold",
    "OFFICIAL_FIELDS",
    "PER_ITEM_FILE",
    "ParsedAnswer",
    "RESULT_FIELDS",
    "SUMMARY_FILE",
    "csv_tables",
    "normalize_region_case",
    "parse_answer",
    "prepare_gold",
    "read_scored_rows",
    "score_item",
    "score_many",
    "score_parsed",
    "score_predictions",
    "summarize",
    "summary_markdown",
    "write_scored_run",
]
