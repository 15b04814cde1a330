"""Fixtures every test file may ask for by name (pytest finds them here; a test
file never imports this module).

- ``write_spec``: ``write_spec(folder, text, name="spec.yaml") -> path``.
- ``small_spec_text``: the one small eval spec (three families, small grids) that
  generator, data and reliability tests build on; ``small_spec``: it written
  into the test's ``tmp_path``.
- ``tiny_train_spec``: ``tiny_train_spec(name) -> text``, the one training spec
  of the train/report tests (one family, 28 px cells: Qwen-VL patches).
- ``release_split``, ``smoke_split`` and ``train_split``: factories of generated
  splits (one process), for a test's own or a module's folder.
- ``tiny_model_dir`` (one tiny model per session, read-only) and
  ``rose_sample_dir`` (the vendored ROSE v0.1 metadata).
- ``command_line``: ``command_line(command, out, split=, predictions=, run=) -> argv``,
  a valid command line of a rosetrain command writing to ``out`` (the path and
  ownership tests change one part of it).

Tests that train or run a model, or take a second or more, are marked ``slow``
(``make test-fast`` leaves them out): with ``@pytest.mark.slow``, or by name in
:data:`SLOW` below.
"""

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROSE_V01 = ROOT / "tests" / "data" / "rose-v0.1"  # real release metadata, vendored
GENERATORS = ROOT / "generators"

requires_cjk = pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig missing")


@pytest.fixture(scope="session", autouse=True)
def _cache_folder(tmp_path_factory):
    """The session's own cache folder (font rankings, rankings.py), so tests
    never write in the user's ~/.cache; subprocesses inherit it."""
    old = os.environ.get("ROSETRAIN_CACHE_DIR")
    os.environ["ROSETRAIN_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("ROSETRAIN_CACHE_DIR", None)
    else:
        os.environ["ROSETRAIN_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def rose_sample_dir() -> Path:
    return ROSE_V01


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """One tiny model (``size="tiny"``, seed 0) for the whole session. Read-only:
    a test that changes the folder must copy it first."""
    from rosetrain.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny", size="tiny")


def _write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def write_spec() -> Callable[..., Path]:
    """``write_spec(folder, text, name="spec.yaml")``: the spec file's path."""
    return _write_spec


SMALL_SPEC = """
name: small
role: eval
namespace: test-small
seed: 3
rows: [3, 6]
cols: [3, 6]
cell_size: [24, 40]
exceptions: [1, 4]
negative_rate: 0.2
image_multiple: 4
families:
  attribute: 1
  sprite_edit: 1
  sprite_pair: 1
"""


@pytest.fixture(scope="session")
def small_spec_text() -> str:
    return SMALL_SPEC


@pytest.fixture
def small_spec(tmp_path) -> Path:
    """The small spec, written to ``tmp_path/spec.yaml``."""
    return _write_spec(tmp_path, SMALL_SPEC)


TINY_TRAIN_SPEC = """
name: {name}
role: train
namespace: {name}
seed: 1
rows: [3, 4]
cols: [3, 4]
cell_size: [28, 28]
image_multiple: 28
exceptions: [1, 3]
negative_rate: 0.1
families: [attribute]
"""


@pytest.fixture(scope="session")
def tiny_train_spec() -> Callable[[str], str]:
    """``tiny_train_spec(name)``: the tiny training spec under its own name and namespace."""

    def named(name: str) -> str:
        return TINY_TRAIN_SPEC.format(name=name)

    return named


def _generate_train_split(root: Path, spec_text: str, scenes: int) -> Path:
    """A small release + Parquet split of ``spec_text`` under ``root/data`` (one process)."""
    from rosetrain.cli import main as cli_main

    (root / "train.yaml").write_text(spec_text)
    command = ["generate", "--spec", str(root / "train.yaml"), "--out", str(root / "data")]
    command += ["--split", "train", "--scenes", str(scenes), "--formats", "release,hf"]
    assert cli_main([*command, "--num-proc", "1", "--quiet"]) == 0
    return root / "data"


@pytest.fixture(scope="session")
def train_split() -> Callable[[Path, str, int], Path]:
    """``train_split(root, spec_text, scenes)``: a release + Parquet ``train``
    split under ``root/data``."""
    return _generate_train_split


def _generate_release_split(
    spec: Path, out: Path, scenes: int, split: str = "test", seed: int | None = None
) -> Path:
    """A release-only split of the spec file ``spec`` at ``out`` (one process)."""
    from rosetrain.cli import main as cli_main

    command = ["generate", "--spec", str(spec), "--out", str(out), "--split", split]
    command += ["--scenes", str(scenes), "--formats", "release", "--num-proc", "1", "--quiet"]
    if seed is not None:
        command += ["--seed", str(seed)]
    assert cli_main(command) == 0
    return out


@pytest.fixture(scope="session")
def release_split() -> Callable[..., Path]:
    """``release_split(spec, out, scenes, split="test", seed=None)``: a release-only
    split of a spec file at ``out``."""
    return _generate_release_split


def _generate_smoke_split(out: Path, scenes: int = 3, seed: int | None = None) -> Path:
    return _generate_release_split(GENERATORS / "smoke.yaml", out, scenes, seed=seed)


@pytest.fixture(scope="session")
def smoke_split() -> Callable[..., Path]:
    """``smoke_split(out, scenes=3, seed=None)``: a release-only ``test`` split of
    ``generators/smoke.yaml`` at ``out``."""
    return _generate_smoke_split


# Tests `make test-fast` leaves out besides those marked by hand and those that
# run the tiny model: each took 0.7 s or more (the two cores shared, `pytest
# --durations`), or shares a slow module fixture with the others listed. A name
# without [params] covers every param; a file name, every test in it.
SLOW = (
    "tests/test_compare.py::test_detects_a_real_improvement",
    "tests/test_compare.py::test_same_seed_same_interval_and_noise_straddles_zero",
    "tests/test_config.py::test_a_yaml_file_nested_5000_deep_is_a_one_line_error",
    "tests/test_config.py::test_the_loss_types_and_reward_scalings_are_trls",
    "tests/test_curriculum.py::test_generate_makes_data_from_the_written_spec_in_an_empty_folder",
    "tests/test_curriculum.py::test_rose_rows_give_cells",
    "tests/test_curriculum.py::test_the_demo_round2_spec_round_trips",
    "tests/test_curriculum.py::test_untaught_cells_are_reported",
    "tests/test_curriculum.py::test_written_spec_weights_failed_templates_and_loads",
    "tests/test_evaluate.py::test_eval_openai_endpoint_scores_resumes_and_retries_only_failures",
    "tests/test_evaluate.py::test_sigint_mid_run_then_rerun_finishes_with_no_item_lost_or_doubled",
    "tests/test_families.py::test_bytes_repeat_across_processes",
    "tests/test_families.py::test_glyph_never_draws_an_identical_pair",
    "tests/test_families.py::test_items_are_deterministic_and_json",
    "tests/test_families.py::test_subtlety_makes_the_exception_closer",
    "tests/test_frictions.py::test_a_large_split_is_announced_with_its_disk_size_before_anything_is_written",
    "tests/test_generate.py::test_generate_cli_starts_without_torch",
    "tests/test_generate.py::test_generate_command_refuses_pandas_only_in_its_own_process",
    "tests/test_generate.py::test_hf_parquet_and_stream_give_the_same_rows",
    "tests/test_generate_distributed.py::test_ray_on_a_local_two_worker_cluster_is_byte_identical",
    "tests/test_hub_cards.py::test_a_trained_model_names_its_base_data_method_and_version",
    "tests/test_install_wheel.py",
    "tests/test_packaging.py::test_stream_dataset_takes_a_shipped_spec_from_any_folder",
    "tests/test_recipes_all.py::test_tiny_qwen2_5_vl_loads_through_auto_classes_with_windowed_vision",
    "tests/test_reliability_eval.py::test_a_hub_id_that_cannot_be_fetched_offline",
    "tests/test_reliability_eval.py::test_a_second_eval_into_the_same_folder_is_refused",
    "tests/test_reliability_eval.py::test_an_endpoint_that_never_answers_stops_the_run",
    "tests/test_reliability_eval.py::test_disk_full_while_saving_predictions",
    "tests/test_reliability_eval.py::test_eval_cli_against_a_flaky_endpoint_exits_non_zero_in_one_line",
    "tests/test_reliability_eval.py::test_sigkilled_eval_resumes_to_the_uninterrupted_result",
    "tests/test_reliability_eval.py::test_resuming_with_settings_that_change_answers_is_refused",
    "tests/test_reliability_ray.py::test_an_unreachable_ray_address_is_one_line_at_once",
    "tests/test_reliability_generate_kill.py",
    "tests/test_reliability_tiny_model.py::test_a_folder_rosetrain_wrote_is_replaced_unless_the_user_added_to_it",
    "tests/test_report_html.py::test_compare_writes_a_self_contained_html_report",
    "tests/test_rose_layout.py::test_main_file_holds_the_five_templates_and_bridges_have_their_own_files",
    "tests/test_rose_layout.py::test_readers_find_the_bridges_in_their_files",
    "tests/test_rose_layout.py::test_gold_answers_fill_table_rows_at_100",
    "tests/test_rose_layout.py::test_a_rerun_owns_its_bridge_files",
    "tests/test_runners.py::test_openai_runner_retries_bounds_concurrency_and_records_failures",
    "tests/test_scoring.py::test_any_text_gives_a_scored_row",
    "tests/test_scoring_official.py::test_every_official_field_agrees_on_hundreds_of_variants_per_template",
    "tests/test_stream_ranks.py",
    "tests/test_tiny_model.py::test_build_is_deterministic_per_seed",
    "tests/test_tiny_model.py::test_qwen3_vl_family_loads_through_auto_classes",
    "tests/test_train_check.py::test_every_shipped_recipe_checks_with_heldout_evaluation_off",
    "tests/test_train_distributed.py",
    "tests/test_train_resume.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.nodeid.split("[")[0]
        # a test that runs the tiny model: the first one builds it (seconds) for the session
        if "tiny_model_dir" in getattr(item, "fixturenames", ()) or any(
            name == slow or name.startswith(slow + "::") for slow in SLOW
        ):
            item.add_marker(pytest.mark.slow)


def _command_line(command: str, out: Path, split: Path, predictions: Path, run: Path) -> list[str]:
    """A valid command line of ``command`` writing its output at ``out``; the
    eval runs against an endpoint nobody listens on (its folder is taken first)."""
    split, predictions, run, out = str(split), str(predictions), str(run), str(out)
    return {
        "generate": ["generate", "--spec", "smoke", "--out", out, "--scenes", "1", "--split", "test"],
        "preview": ["preview", "--data", split, "--out", out, "--limit", "1"],
        "score": ["score", "--data", split, "--predictions", predictions, "--out", out],
        "eval": [
            *("eval", "--runner", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"),
            *("--data", split, "--out", out, "--max-retries", "0", "--no-progress"),
        ],
        "compare": ["compare", run, run, "--out", out, "--no-plots", "--resamples", "10"],
        "export-lmms-eval": ["export-lmms-eval", "--data", split, "--out", out],
        "tiny-model": ["tiny-model", "--out", out],
        "curriculum": ["curriculum", "--from", run, "--spec", "smoke", "--out", out],
        "configs": ["configs", "copy", "spec", "smoke", out],
        # the default base model: a bad --out is refused before it is loaded
        "demo": ["demo", "--out", out],
    }[command]


@pytest.fixture(scope="session")
def command_line() -> Callable[..., list[str]]:
    return _command_line
