"""The generator's promises: determinism, honest labels, parseable gold answers,
clear errors before any output, resumable atomic writes, HF and stream rows."""

import hashlib
import json
from pathlib import Path

import pytest
from PIL import Image

from rosetrain.cli import main
from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.data.generate import make_job, run_job
from rosetrain.generators.spec import load_spec
from rosetrain.scoring import parse_answer, score_item

GENERATORS = Path(__file__).resolve().parent.parent / "generators"


def generate(spec_path, out, scenes=12, num_proc=1, **kw):
    job = make_job(load_spec(spec_path), out, "test", scenes, num_proc=num_proc, **kw)
    run_job(job, progress=False)
    return [json.loads(line) for line in open(out / "metadata_test.jsonl")]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".parts" not in p.parts
    }


@pytest.fixture(scope="module")
def small_split(tmp_path_factory, small_spec_text, write_spec):
    tmp = tmp_path_factory.mktemp("small")
    spec = write_spec(tmp, small_spec_text)
    return spec, tmp / "out", generate(spec, tmp / "out", scenes=30)


def test_same_bytes_whatever_num_proc(tmp_path, small_split):
    spec, out, _ = small_split
    generate(spec, tmp_path / "two", scenes=30, num_proc=2)
    assert tree_digest(out) == tree_digest(tmp_path / "two")


def test_every_template_unique_ids_and_relative_images(small_split):
    _, out, rows = small_split
    assert {r["task_template"] for r in rows} == set(P.TEMPLATES)
    assert len({r["item_id"] for r in rows}) == len(rows)
    for r in rows:
        assert not Path(r["image"]).is_absolute() and (out / r["image"]).exists()
        assert r["task_mode"] == P.TASK_MODE[r["task_template"]]
        assert r["ground_truth_count"] == len(r["ground_truth_clicks"])


def test_labels_are_honest(small_split):
    """Crop every cell of each base image: the cells that differ from the
    majority are exactly all_target_cells."""
    _, out, rows = small_split
    seen_negative = False
    for r in rows:
        if r["task_template"] != P.T1:
            continue
        image = Image.open(out / r["image"]).convert("RGB")
        size = r["cell_size"]
        assert image.size == (r["cols"] * size, r["rows"] * size)
        crops = {
            (row, col): image.crop(((col - 1) * size, (row - 1) * size, col * size, row * size)).tobytes()
            for row in range(1, r["rows"] + 1)
            for col in range(1, r["cols"] + 1)
        }
        counts = {}
        for data in crops.values():
            counts[data] = counts.get(data, 0) + 1
        majority = max(counts, key=counts.get)
        odd = {P.cell_str(cell) for cell, data in crops.items() if data != majority}
        assert odd == set(r["all_target_cells"]), r["scene_id"]
        seen_negative |= not odd
    assert seen_negative, "negative_rate 0.2 over 30 scenes should give a scene without exceptions"


def test_gold_answers_parse_and_pass(small_split):
    _, _, rows = small_split
    for r in rows:
        assert parse_answer(r["answer"], r["task_mode"]).valid, r["answer"]
        assert score_item(r, r["answer"])["pass"], r["item_id"]


def test_region_cases_and_zero_target_regions(small_split):
    _, _, rows = small_split
    from rosetrain.core.regions import cells_in_region

    click_rows = [r for r in rows if r["task_template"] in (P.T3, P.T4, P.T5)]
    assert any(r["region_case"] == "zero" and r["answer"] in ("DONE", "SUBMIT(0)") for r in click_rows)
    for r in rows:
        cells = cells_in_region(r["region_type"], r["region_params"], r["rows"], r["cols"])
        inside = {P.cell_str(c) for c in cells} & set(r["all_target_cells"])
        assert inside == set(r["region_target_cells"])
        expected = "zero" if not inside else "all" if inside == set(r["all_target_cells"]) else "partial"
        assert r["region_case"] == expected
        if r["task_template"] not in (P.T1, P.T1B):
            assert len(cells) < r["rows"] * r["cols"], "a local region must not be the whole grid"
    by_scene = {}
    for r in rows:
        by_scene.setdefault(r["scene_id"], {})[r["task_template"]] = r
    for tasks in by_scene.values():
        assert tasks[P.T2B]["region_params"] == tasks[P.T3]["region_params"]
        assert (tasks[P.T2]["region_type"], tasks[P.T2]["region_params"]) != (
            tasks[P.T3]["region_type"],
            tasks[P.T3]["region_params"],
        )
        assert tasks[P.T4]["image"] != tasks[P.T1]["image"]


@pytest.mark.parametrize("exclusion", [False, True])
def test_an_impossible_case_falls_back_to_the_nearest_one(exclusion):
    """One target cannot be "partial": the nearest case is "all" (the target
    in the clickable cells), for an exclusion region too, never "zero"."""
    import random

    from rosetrain.generators.scene import Scene
    from rosetrain.generators.tasks import sample_region

    scene = Scene(
        scene_id="s",
        index=0,
        seed=0,
        level="l",
        family="attribute",
        family_config={},
        item={},
        rows=3,
        cols=3,
        cell_size=28,
        profile="small",
        targets=((2, 2),),
    )
    rng = random.Random(0)
    for kind in (P.ROW_RANGE, P.COL_RANGE, P.RECTANGLE):
        for _ in range(20):
            region, case = sample_region(rng, kind, scene, "partial", exclusion=exclusion)
            assert case == "all"
            assert (2, 2) in region.cells(3, 3) and len(region.cells(3, 3)) < 9


def test_rose_prompts_are_verbatim(small_split):
    _, _, rows = small_split
    t1b = next(r for r in rows if r["task_template"] == P.T1B)
    assert t1b["prompt_local"] == (
        "Click all cells that are different from the majority in the whole grid. "
        "Answer only using CLICK(Rr,Cc); ...; DONE."
    )
    assert all(r["prompt"].startswith(P.PROMPT_PREFIX) for r in rows)


@pytest.mark.parametrize(
    "mutation, message",
    [
        ("families: [nosuch]", "unknown family 'nosuch'"),
        ("exceptions: [1, 40]", "exceptions"),
        ("region_cases: {zero: 0.5, partial: 0.3, all: 0.1}", "sums to 0.9"),
        ("bogus_field: 1", "unknown key 'bogus_field'"),
        ("rows: [3, 30]", "rows"),
        ("heldout_family: sprite_pair", "now heldout_family_name"),
    ],
)
def test_bad_spec_fails_before_output(tmp_path, mutation, message, capsys, small_spec_text, write_spec):
    key = mutation.split(":")[0]
    text = (
        "\n".join(
            line
            for line in small_spec_text.splitlines()
            if not line.startswith(key) and not (key == "families" and line.startswith("  "))
        )
        + "\n"
        + mutation
        + "\n"
    )
    spec = write_spec(tmp_path, text)
    code = main(
        [
            "generate",
            "--spec",
            str(spec),
            "--out",
            str(tmp_path / "out"),
            "--split",
            "t",
            "--scenes",
            "3",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and str(spec) in err
    assert not (tmp_path / "out").exists()


def test_missing_font_is_a_clear_error(tmp_path, capsys, small_spec_text, write_spec):
    spec = write_spec(
        tmp_path, small_spec_text.replace("  attribute: 1", "  glyph: {fonts: [No Such Font Sans]}")
    )
    code = main(["generate", "--spec", str(spec), "--out", str(tmp_path / "o"), "--scenes", "2", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "glyph" in err and str(spec) in err


def test_interrupted_generate_resumes_to_same_bytes(tmp_path, small_split, monkeypatch):
    spec, out, _ = small_split
    import rosetrain.data.generate as gen

    real = gen.write_shard
    calls = {"n": 0}

    def flaky(job, shard):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(job, shard)

    monkeypatch.setattr(gen, "write_shard", flaky)
    with pytest.raises(KeyboardInterrupt):
        generate(spec, tmp_path / "resume", scenes=30, shard_size=8)
    assert not (tmp_path / "resume" / "metadata_test.jsonl").exists()
    assert not list((tmp_path / "resume").rglob("*.tmp*"))
    monkeypatch.setattr(gen, "write_shard", real)
    generate(spec, tmp_path / "resume", scenes=30, shard_size=8)
    assert (tmp_path / "resume" / "metadata_test.jsonl").read_bytes() == (
        out / "metadata_test.jsonl"
    ).read_bytes()


def test_rerun_with_other_settings_is_refused(tmp_path, small_split):
    spec, _, _ = small_split
    generate(spec, tmp_path / "o", scenes=4)
    with pytest.raises(RosetrainError, match="scenes"):
        generate(spec, tmp_path / "o", scenes=5)


def test_hf_parquet_and_stream_give_the_same_rows(small_split):
    import datasets

    from rosetrain.data.hf import load_hf_split, stream_dataset

    spec, out, rows = small_split
    ds = load_hf_split(str(out), "test")
    assert isinstance(ds.features["images"].feature, datasets.Image)
    assert ds.num_rows == len(rows)
    first = ds[0]
    assert first["images"][0].size == (rows[0]["image_width"], rows[0]["image_height"])
    assert first["prompt"][0]["content"][1]["type"] == "image"
    assert first["completion"][0]["content"][0]["text"] == rows[0]["answer"]
    streamed = list(stream_dataset(str(spec), split="test", seed=3, stop=2))
    n = len(streamed)
    for a, b in zip(streamed, ds.select(range(n))):
        assert a["item_id"] == b["item_id"] and a["answer"] == b["answer"]
        assert a["images"][0].tobytes() == b["images"][0].convert("RGB").tobytes()


def _stream_ids(spec, **kw):
    from rosetrain.data.hf import stream_dataset

    return stream_dataset(str(spec), split="test", seed=3, **kw).select_columns(["item_id", "scene_id"])


def test_stream_reads_scenes_in_order_like_the_writer(small_split):
    import itertools

    spec, _, rows = small_split
    streamed = [r["item_id"] for r in _stream_ids(spec, stop=6)]
    assert streamed == [r["item_id"] for r in rows if r["scene_index"] < 6]
    for start in (0, 2):  # unlimited: scenes start, start+1, ... (not one shard's 0, 64, 128, ...)
        expected = [r["item_id"] for r in rows if start <= r["scene_index"] < start + 3]
        assert [
            r["item_id"] for r in itertools.islice(_stream_ids(spec, start=start), len(expected))
        ] == expected


def test_stream_shards_split_across_ranks_and_dataloader_workers(small_split):
    """Two ranks or two workers make disjoint rows that are together one consumer's
    rows, each of them the same on every run (consumer k of 2 reads scenes k, k+2, ...)."""
    import torch.utils.data
    from datasets.distributed import split_dataset_by_node

    spec, _, rows = small_split
    index = {r["item_id"]: r["scene_index"] for r in rows}
    one = [r["item_id"] for r in _stream_ids(spec, stop=6)]

    def ranks():
        return [
            [r["item_id"] for r in split_dataset_by_node(_stream_ids(spec, stop=6), rank=k, world_size=2)]
            for k in range(2)
        ]

    by_rank = ranks()
    assert by_rank == ranks()
    assert not set(by_rank[0]) & set(by_rank[1]) and sorted(by_rank[0] + by_rank[1]) == sorted(one)
    assert [index[i] % 2 for i in by_rank[1]] == [1] * len(by_rank[1])

    def workers():
        dataset = _stream_ids(spec, stop=6).map(lambda r: {"worker": torch.utils.data.get_worker_info().id})
        loader = torch.utils.data.DataLoader(dataset, num_workers=2, batch_size=None)
        return [(r["item_id"], r["worker"]) for r in loader]

    by_workers = workers()
    assert by_workers == workers()
    assert sorted(i for i, _ in by_workers) == sorted(one)
    assert all(index[i] % 2 == worker for i, worker in by_workers)


def test_stream_never_yields_an_excluded_scene(
    tmp_path, small_split, monkeypatch, small_spec_text, write_spec
):
    import rosetrain.generators.heldout as heldout
    from rosetrain.generators.scene import sample_scene

    spec, _, rows = small_split
    fingerprint = {r["scene_index"]: r["scene_fingerprint"] for r in rows}
    streamed = {
        r["scene_id"]
        for r in _stream_ids(spec, stop=5, exclude_fingerprints={fingerprint[1], fingerprint[3]})
    }
    assert streamed == {"test-0000000", "test-0000002", "test-0000004"}
    # a training spec that names a held-out spec skips the held-out scenes by default
    write_spec(
        tmp_path,
        small_spec_text.replace("role: eval", "role: heldout").replace(
            "namespace: test-small", "namespace: heldout"
        ),
        "h.yaml",
    )
    train = write_spec(
        tmp_path,
        small_spec_text.replace("role: eval", "role: train").replace(
            "namespace: test-small", "namespace: t-small\nheldout_spec: h.yaml"
        ),
        "t.yaml",
    )
    train_fingerprint = {i: sample_scene(load_spec(train), 3, i, "test").fingerprint for i in range(4)}
    monkeypatch.setattr(
        heldout, "heldout_fingerprints", lambda heldout: {train_fingerprint[0], train_fingerprint[2]}
    )
    assert {r["scene_id"] for r in _stream_ids(train, stop=4)} == {"test-0000001", "test-0000003"}


def test_image_multiple_of_28(tmp_path, small_spec_text, write_spec):
    spec = write_spec(tmp_path, small_spec_text.replace("image_multiple: 4", "image_multiple: 28"))
    for r in generate(spec, tmp_path / "o", scenes=6):
        assert r["image_width"] % 28 == 0 and r["image_height"] % 28 == 0


def test_training_spec_never_overlaps_heldout(tmp_path, small_spec_text, write_spec):
    heldout = write_spec(
        tmp_path,
        small_spec_text.replace("role: eval", "role: heldout").replace(
            "namespace: test-small",
            "namespace: heldout\nheldout_family_name: sprite_pair\nheldout_scenes: 50",
        ),
        "h.yaml",
    )
    train_text = small_spec_text.replace(
        "namespace: test-small", "namespace: train\nheldout_spec: h.yaml"
    ).replace("role: eval", "role: train")
    with pytest.raises(RosetrainError, match="held out"):
        load_and_make(write_spec(tmp_path, train_text, "t.yaml"), tmp_path)
    ok = write_spec(tmp_path, train_text.replace("  sprite_pair: 1\n", ""), "t2.yaml")
    job = load_and_make(ok, tmp_path)
    assert len(job.exclude) > 0
    # the same scenes as the held-out split are refused: exclude its own metadata
    rows = generate(heldout, tmp_path / "h", scenes=3)
    with pytest.raises(RosetrainError, match="held-out"):
        generate(
            heldout, tmp_path / "again", scenes=3, exclude_metadata=[tmp_path / "h" / "metadata_test.jsonl"]
        )
    assert rows[0]["heldout_family"] in (True, False)


HUE_HELDOUT = """
name: h
role: heldout
namespace: heldout
heldout_family_name: sprite_edit
heldout_hue_band: [50, 150]
rows: 3
cols: 3
cell_size: 32
exceptions: [1, 2]
families: {attribute: {hue_range: [60, 140]}}
"""
COUNTING = "{T1_COUNT_GLOBAL: 1, T2B_COUNT_LOCAL_MATCHED: 1}"


def hue_training_spec(level: str) -> str:
    return (
        "name: t\nrole: train\nheldout_spec: h.yaml\nrows: 3\ncols: 3\ncell_size: 32\n"
        "exceptions: [1, 2]\nfamilies: [attribute]\nlevels:\n  - name: a\n" + level
    )


@pytest.mark.parametrize(
    "level, refused",
    [
        # click tasks on every hue: the band can be the majority or the exception
        ("    families: {attribute: {swap_roles: true}}\n", "hue band \\[50, 150\\] is held out"),
        # a hue range outside the band is not enough: the exception is 150 degrees away
        ("    families: {attribute: {hue_range: [170, 200], swap_roles: false}}\n", "add it to hue_exclude"),
        (
            "    families: {attribute: {hue_exclude: [[50, 100]]}}\n",
            "hue_exclude \\(now \\[\\[50.0, 100.0\\]\\]\\)",
        ),
        ("    families: {sprite_edit: 1}\n", "'sprite_edit' is held out of the action data"),
        # covered by one band or by two that touch; counting-only levels may show both
        ("    families: {attribute: {hue_exclude: [[40, 160]]}}\n", None),
        ("    families: {attribute: {hue_exclude: [[50, 100], [100, 150]]}}\n", None),
        (f"    tasks: {COUNTING}\n    families: {{attribute: 1, sprite_edit: 1}}\n", None),
    ],
)
def test_the_heldout_hue_band_and_family_stay_out_of_the_action_data(tmp_path, write_spec, level, refused):
    from rosetrain.generators.heldout import check_training_spec

    write_spec(tmp_path, HUE_HELDOUT, "h.yaml")
    spec = load_spec(write_spec(tmp_path, hue_training_spec(level), "t.yaml"))
    if refused is None:
        assert check_training_spec(spec).heldout_hue_band == (50.0, 150.0)
        return
    with pytest.raises(RosetrainError, match=refused) as err:
        check_training_spec(spec)
    assert "t.yaml: levels (a)" in str(err.value) or "t.yaml: " in str(err.value)


def test_generated_action_rows_never_show_the_heldout_band(tmp_path, write_spec):
    write_spec(tmp_path, HUE_HELDOUT, "h.yaml")
    text = hue_training_spec(
        "    families: {attribute: {subtlety: 0.0, attributes: [hue], swap_roles: true, hue_exclude: [[50, 150]]}}\n"
        f"  - name: perceive\n    tasks: {COUNTING}\n"
    )
    rows = generate(write_spec(tmp_path, text, "t.yaml"), tmp_path / "o", scenes=60)
    hues = {
        (r["task_template"] in ("T1_COUNT_GLOBAL", "T2B_COUNT_LOCAL_MATCHED"), spec["hue"])
        for r in rows
        for spec in (r["background_spec"], r["target_spec"])
    }
    assert not [h for counting, h in hues if not counting and 50 <= h <= 150]
    assert [h for counting, h in hues if counting and 50 <= h <= 150]  # perception sees the band


def test_heldout_hue_band_belongs_to_heldout_specs(tmp_path, write_spec):
    spec = write_spec(
        tmp_path,
        hue_training_spec("    name: a\n").replace("role: train", "role: train\nheldout_hue_band: [1, 2]"),
    )
    with pytest.raises(RosetrainError, match="heldout_hue_band: only a spec with role: heldout"):
        load_spec(spec)


def load_and_make(spec_path, tmp_path):
    return make_job(load_spec(spec_path), tmp_path / "x", "train", 5)


def test_reserved_namespace(tmp_path, small_spec_text, write_spec):
    spec = write_spec(tmp_path, small_spec_text.replace("namespace: test-small", "namespace: heldout"))
    with pytest.raises(RosetrainError, match="heldout"):
        load_spec(spec)


@pytest.mark.parametrize("name", ["rose-protocol", "heldout", "curriculum", "smoke"])
def test_shipped_specs_load(name):
    spec = load_spec(GENERATORS / f"{name}.yaml")
    assert spec.levels


def test_generate_cli_starts_without_torch(tmp_path, small_spec_text, write_spec):
    import subprocess
    import sys

    code = (
        "import sys, rosetrain.cli as c; c.main(['generate','--spec',sys.argv[1],'--out',sys.argv[2],"
        "'--scenes','2','--quiet']); assert 'torch' not in sys.modules, 'torch imported'"
    )
    spec = write_spec(tmp_path, small_spec_text)
    subprocess.run([sys.executable, "-c", code, str(spec), str(tmp_path / "o")], check=True)


def test_generate_command_refuses_pandas_only_in_its_own_process(tmp_path, small_spec_text, write_spec):
    """pyarrow would import pandas for nothing: the command's own process refuses
    it (the bytes are the same); a caller's process is left as it was."""
    import subprocess
    import sys

    spec = write_spec(tmp_path, small_spec_text)
    args = "'generate','--spec',sys.argv[1],'--out',sys.argv[2],'--scenes','2','--num-proc','1','--quiet'"
    own = f"import sys, rosetrain.cli as c; sys.argv = ['rosetrain', {args}]; c.main(); assert 'pandas' not in sys.modules"
    callers = f"import sys, rosetrain.cli as c; c.main([{args}]); import pandas"
    for name, code in (("own", own), ("caller", callers)):
        subprocess.run([sys.executable, "-c", code, str(spec), str(tmp_path / name)], check=True)
    assert (tmp_path / "own" / "hf").exists()
    own_files = sorted(p.relative_to(tmp_path / "own") for p in (tmp_path / "own").rglob("*") if p.is_file())
    for rel in own_files:
        if rel.name != ".rosetrain.lock":
            assert (tmp_path / "own" / rel).read_bytes() == (tmp_path / "caller" / rel).read_bytes(), rel


def test_files_named_like_temps_that_rosetrain_did_not_write_are_left_alone(tmp_path, small_spec):
    """A run removes only the temps a killed run recorded in its journals: a
    look-alike of a temp, in a user's folder or in rosetrain's own image folder,
    is never taken for one by its name."""
    from rosetrain.core.io import temp_path
    from rosetrain.data.manifest import journal_path

    out = tmp_path / "out"
    users = [
        out / ".metadata_test.jsonl.tmp",
        out / ".metadata_test.jsonl.2024-06.tmp",
        out / ".metadata_test_global_click_bridge.jsonl.12-34.tmp",
        out / "images" / "mine" / ".test-0000001.png.12-34.tmp",
    ]
    for path in users:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's")
    generate(small_spec, out, scenes=3)
    users.append(out / "images" / "rosetrain-attribute" / ".test-0000001.png.12-34.tmp")
    users[-1].write_text("named like ours, recorded nowhere")
    ours = temp_path(out / "images" / "rosetrain-attribute" / "test-0000002.png")
    ours.write_text("a killed run's")
    journal = journal_path(out, "test", "part-00000")
    journal.write_text(ours.relative_to(out).as_posix() + "\n" + "../outside\n" + "images/cut-by-the-ki")
    (tmp_path / "outside").write_text("never touched")
    generate(small_spec, out, scenes=3)  # the same split again: resumed, its recorded temps cleaned
    assert not ours.exists() and not journal.exists()
    assert all(path.exists() for path in users) and (tmp_path / "outside").read_text() == "never touched"
    assert not list((out / ".parts").rglob("*.temps"))  # a finished run leaves no journal


def test_the_guard_holds_for_a_spec_of_any_role_that_names_a_heldout_spec(tmp_path, write_spec):
    """An eval spec streamed into training is training data: its click levels
    may not show the held-out band either."""
    from rosetrain.generators.heldout import check_training_spec

    write_spec(tmp_path, HUE_HELDOUT, "h.yaml")
    text = hue_training_spec("    families: {attribute: {swap_roles: true}}\n").replace(
        "role: train", "role: eval"
    )
    spec = load_spec(write_spec(tmp_path, text, "e.yaml"))
    with pytest.raises(RosetrainError, match="hue band \\[50, 150\\] is held out"):
        check_training_spec(spec)


CUE_SPEC = """
name: cued
role: train
namespace: cued
seed: 5
rows: [3, 4]
cols: [3, 4]
cell_size: [28, 28]
exceptions: [1, 3]
negative_rate: 0.1
cue: {style: dim, color: [0, 0, 0], width: 4}
families: [attribute]
tasks: {T1_COUNT_GLOBAL: 1, T2_COUNT_LOCAL_NUMERIC: 1, T4_CLICK_VISUAL_REGION: 1}
"""


def test_cue_on_shows_a_global_question_on_the_highlighted_image(tmp_path, write_spec):
    """With cue_on, T1 is asked of T4's highlighted image: its question, answer and
    every other record are those of the same spec without it."""
    plain = generate(write_spec(tmp_path, CUE_SPEC, "plain.yaml"), tmp_path / "plain", scenes=8)
    cued_spec = write_spec(tmp_path, CUE_SPEC + "cue_on: [T1_COUNT_GLOBAL]\n", "cued.yaml")
    cued = generate(cued_spec, tmp_path / "cued", scenes=8)
    assert len(plain) == len(cued)
    for before, after in zip(plain, cued):
        if after["task_template"] != P.T1:
            assert after == before
            continue
        scene = after["scene_id"]
        t4 = next(r for r in cued if r["scene_id"] == scene and r["task_template"] == P.T4)
        assert after["image"] == t4["image"] and after["image_id"] == f"{scene}-cue"
        assert after["cue_type"] == "VISUAL_HIGHLIGHT" and after["base_image"] == before["image"]
        assert after["cue_region_params"] == t4["region_params"]
        changed = {"image", "image_id", "cue_type", "base_image", "cue_region_params"}
        assert {k: v for k, v in after.items() if k not in changed} == {
            k: v for k, v in before.items() if k not in changed
        }
    # the highlighted image is drawn once, the same bytes as without cue_on
    assert tree_digest(tmp_path / "plain" / "images") == tree_digest(tmp_path / "cued" / "images")


def test_cue_on_without_t4_draws_t4s_region(tmp_path, write_spec):
    text = CUE_SPEC.replace(", T4_CLICK_VISUAL_REGION: 1", "") + "cue_on: [T1_COUNT_GLOBAL]\n"
    rows = generate(write_spec(tmp_path, text), tmp_path / "out", scenes=4)
    for row in (r for r in rows if r["task_template"] == P.T1):
        cue = Image.open(tmp_path / "out" / row["image"]).convert("RGB")
        base = Image.open(tmp_path / "out" / row["base_image"]).convert("RGB")
        params, side = row["cue_region_params"], 28
        inside = ((params["c1"] - 1) * side + 6, (params["r1"] - 1) * side + 6)
        outside = next(
            (c * side + 6, r * side + 6)
            for r in range(row["rows"])
            for c in range(row["cols"])
            if not (params["r1"] <= r + 1 <= params["r2"] and params["c1"] <= c + 1 <= params["c2"])
        )
        assert cue.getpixel(inside) == base.getpixel(inside)  # the region keeps its colours
        assert sum(cue.getpixel(outside)) < sum(base.getpixel(outside))  # the rest is dimmed


def test_v_clks_counting_twin_counts_inside_t4s_highlighted_region(tmp_path, write_spec):
    """T4C (training only) asks T4's question as a count, of T4's own highlighted
    image: same region and image, the count of its targets; every other record and
    every image are those of the same spec without it."""
    plain = generate(write_spec(tmp_path, CUE_SPEC, "plain.yaml"), tmp_path / "plain", scenes=8)
    text = CUE_SPEC.replace(
        "T4_CLICK_VISUAL_REGION: 1}", "T4_CLICK_VISUAL_REGION: 1, T4C_COUNT_VISUAL_REGION: 1}"
    )
    twin = generate(write_spec(tmp_path, text, "twin.yaml"), tmp_path / "twin", scenes=8)
    counts = [r for r in twin if r["task_template"] == P.T4C]
    assert [r for r in twin if r["task_template"] != P.T4C] == plain and len(counts) == 8
    for row in counts:
        t4 = next(r for r in twin if r["scene_id"] == row["scene_id"] and r["task_template"] == P.T4)
        assert row["task_mode"] == P.COUNT and row["region_type"] == P.VISUAL_REGION
        assert (row["region_params"], row["image"], row["cue_type"]) == (
            t4["region_params"],
            t4["image"],
            "VISUAL_HIGHLIGHT",
        )
        assert row["answer"] == f"COUNT({len(t4['ground_truth_clicks'])})"
        assert row["prompt"].endswith("inside the highlighted region. Answer only in the format: COUNT(n).")
    assert tree_digest(tmp_path / "plain" / "images") == tree_digest(tmp_path / "twin" / "images")


EXCLUSION_SPEC = CUE_SPEC.replace(
    "T4_CLICK_VISUAL_REGION: 1}", "T4_CLICK_VISUAL_REGION: 1, T5_CLICK_COUNT_EXCLUSION: 1}"
)


def test_excl_css_counting_twin_counts_what_t5_clicks(tmp_path, write_spec):
    """T5C (training only) asks T5's question as a count: the same excluded
    region of the same plain image, the count T5 submits, and with a reasoning
    style T5's own thinking; every other record and every image are those of
    the same spec without it, and the scorer grades its answer."""
    from rosetrain.core.reasoning import rationale
    from rosetrain.generators.prompts import exclusion_phrase
    from rosetrain.scoring.gold import Gold

    plain = generate(write_spec(tmp_path, EXCLUSION_SPEC, "plain.yaml"), tmp_path / "plain", scenes=8)
    text = EXCLUSION_SPEC.replace(
        "T5_CLICK_COUNT_EXCLUSION: 1}", "T5_CLICK_COUNT_EXCLUSION: 1, T5C_COUNT_EXCLUSION: 1}"
    )
    twin = generate(write_spec(tmp_path, text, "twin.yaml"), tmp_path / "twin", scenes=8)
    counts, failed = [r for r in twin if r["task_template"] == P.T5C], []
    assert [r for r in twin if r["task_template"] != P.T5C] == plain and len(counts) == 8
    for row in counts:
        t5 = next(r for r in twin if r["scene_id"] == row["scene_id"] and r["task_template"] == P.T5)
        assert row["task_mode"] == P.COUNT and row["region_type"] == P.EXCLUSION
        assert (row["region_params"], row["image"], row["cue_type"], row["region_case"]) == (
            t5["region_params"],
            t5["image"],
            "NONE",
            t5["region_case"],
        )
        assert row["answer"] == f"COUNT({t5['ground_truth_count']})"
        assert t5["answer"].endswith(f"SUBMIT({t5['ground_truth_count']})")
        excluded = f", except {exclusion_phrase(row['region_params'])}"
        assert excluded + ", then" in t5["prompt"]
        assert row["prompt"].endswith(excluded + ". Answer only in the format: COUNT(n).")
        assert rationale("cells-seen", row) == rationale("cells-seen", t5)
        assert score_item(Gold(row), row["answer"])["pass"] == 1
        if row["global_target_count"] != row["ground_truth_count"]:  # counting the excluded cells too
            failed.append(score_item(Gold(row), f"COUNT({row['global_target_count']})"))
    assert failed and all(r["pass"] == 0 and r["exclusion_failure"] == 1 for r in failed)
    assert tree_digest(tmp_path / "plain" / "images") == tree_digest(tmp_path / "twin" / "images")


@pytest.mark.parametrize("twin", [P.T4C, P.T5C])
def test_a_training_split_with_a_counting_twin_is_read_where_training_reads_it(
    tmp_path, write_spec, capsys, twin
):
    """generate writes V-Cnt or Excl-Cnt rows into a training split; preview and
    the signal check (select_records with ``training``) read them, while eval
    and score, which grade ROSE items, refuse them in one line that says where
    they are read."""
    from rosetrain.data.release import select_records
    from rosetrain.generators.preview import REGION_COLORS

    text = EXCLUSION_SPEC.replace("T5_CLICK_COUNT_EXCLUSION: 1}", f"T5_CLICK_COUNT_EXCLUSION: 1, {twin}: 1}}")
    rows = generate(write_spec(tmp_path, text), tmp_path / "twin", scenes=4)
    records, root = select_records(tmp_path / "twin", "test", None, training=True)
    assert [r["item_id"] for r in records] == [r["item_id"] for r in rows] and root == tmp_path / "twin"
    assert twin in {r["task_template"] for r in records}
    sheet = tmp_path / "sheet.png"
    assert main(["preview", str(tmp_path / "twin"), "--template", twin, "--out", str(sheet)]) == 0
    assert REGION_COLORS[twin] in {
        c for _, c in Image.open(sheet).convert("RGB").getcolors(1 << 20)
    }  # its regions, outlined
    with pytest.raises(RosetrainError, match=rf"{twin} \({P.SHORT_NAME[twin]}\) is a training-only template"):
        select_records(tmp_path / "twin", "test", None)
    capsys.readouterr()
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n" for r in rows)
    )
    out = tmp_path / "scored"
    assert (
        main(
            ["score", "--data", str(tmp_path / "twin"), "--predictions", str(predictions), "--out", str(out)]
        )
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert (
        len(error) == 1
        and "metadata_test.jsonl:" in error[0]
        and "rosetrain signal and preview read it" in error[0]
    )
    assert not out.exists()


@pytest.mark.parametrize("twin", [P.T4C, P.T5C])
def test_the_counting_twins_are_training_only(tmp_path, write_spec, twin):
    text = CUE_SPEC.replace("role: train", "role: eval").replace("T4_CLICK_VISUAL_REGION: 1}", f"{twin}: 1}}")
    with pytest.raises(RosetrainError, match=f"tasks: {twin} is a training-only template"):
        load_spec(write_spec(tmp_path, text))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("cue_on: [T2_COUNT_LOCAL_NUMERIC]", "cue_on: only T1_COUNT_GLOBAL, T1B_CLICK_GLOBAL"),
        ("cue_on: T1_COUNT_GLOBAL", "cue_on: expected a list of task templates"),
        ("cue_on: [T1B_CLICK_GLOBAL]", "cue_on: T1B_CLICK_GLOBAL has no weight in this level's tasks"),
        ("cue_on: [T1_COUNT_GLOBAL]\nrole: eval", "cue_on is a training augmentation"),
    ],
)
def test_cue_on_refusals_name_the_key(tmp_path, write_spec, extra, message):
    text = CUE_SPEC.replace("role: train\n", "") if "role:" in extra else CUE_SPEC
    with pytest.raises(RosetrainError, match=message):
        load_spec(write_spec(tmp_path, text + extra + "\n"))


def test_a_parts_image_names_are_its_rows_images_and_a_broken_part_raises(tmp_path, small_split):
    """Finishing a split lists every image from the parts, decoding only the image
    fields: the same names as the rows hold, and a part cut off or not of JSON
    objects is an error, never a shorter list."""
    from rosetrain.data.manifest import part_image_names

    _, out, rows = small_split
    parts = sorted((out / ".parts" / "test").glob("part-*.jsonl"))
    names = [name for part in parts for name in part_image_names(part)]
    assert names == [r[f] for r in rows for f in ("image", "base_image") if isinstance(r.get(f), str)]
    whole = parts[0].read_bytes()
    for broken in (whole[:-1], whole + b"[1, 2]\n", whole + b"{\n"):
        (tmp_path / "part.jsonl").write_bytes(broken)
        with pytest.raises(ValueError):
            part_image_names(tmp_path / "part.jsonl")
