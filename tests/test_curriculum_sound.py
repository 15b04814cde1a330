"""rosetrain curriculum is sound on every input: any failure profile fits (a
template failed outright included), unmeasured cells never outweigh measured
failures, and options that would weight nothing or overwrite the report are
refused before anything is written."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scored_runs import row, write_run

from rosetrain.cli import main
from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import SHORT_NAME, T1, T1B, T2, T2B, T3, T4, T5
from rosetrain.curriculum import make_curriculum
from rosetrain.curriculum.build import (
    fit_draw_weights,
    plan_curriculum,
    reachable_shares,
    realised_shares,
)
from rosetrain.curriculum.cells import AXES, Item, Run
from rosetrain.curriculum.weights import MODES, Rule, axis_shares
from rosetrain.generators.spec import load_spec, spec_from_dict

TEMPLATES = (T1, T2, T3, T4, T5, T1B, T2B)
CASES = ("zero", "partial", "all")
# generators/demo/rl.yaml's settings (7 templates, 4 a scene, a fixed 3x3 grid),
# copied so that edits to the demo's spec do not move these tests
SPEC = """
name: probe-source
role: train
namespace: probe-source
seed: 3
rows: [3, 3]
cols: [3, 3]
cell_size: [32, 32]
exceptions: [1, 2]
negative_rate: 0.1
region_cases: {zero: 0.33, partial: 0.4, all: 0.27}
tasks: {T1_COUNT_GLOBAL: 1, T2_COUNT_LOCAL_NUMERIC: 1, T3_CLICK_LOCAL_NUMERIC: 2, T4_CLICK_VISUAL_REGION: 2,
        T5_CLICK_COUNT_EXCLUSION: 2, T1B_CLICK_GLOBAL: 2, T2B_COUNT_LOCAL_MATCHED: 1}
tasks_per_scene: 4
families:
  attribute: {subtlety: 0.0, attributes: [hue]}
"""


def profile_run(folder: Path, profile: dict[str, tuple[int, int]]) -> Path:
    """A scored run: template -> (items, failed)."""
    rows, i = [], 0
    for template, (n, fails) in profile.items():
        for j in range(n):
            rows.append(row(i, template, j >= fails, case=CASES[j % 3], count=1 + j % 2))
            i += 1
    return write_run(folder, rows)


@pytest.fixture
def spec(tmp_path) -> Path:
    path = tmp_path / "source.yaml"
    path.write_text(SPEC)
    return path


def curriculum(run: Path, spec: Path | str, out: Path | str, *extra: str) -> int:
    return main(["curriculum", "--from", str(run), "--spec", str(spec), "--out", str(out), *extra])


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- a template failed outright: the case the feature exists for ----------------


def test_the_showcase_run_fits_the_reachable_optimum(tmp_path, capsys):
    """Every T3 item fails, every other passes: T3's chosen share (the cap, 3/7)
    is above the 1/4 that 4 draws a scene can give; this ended in ZeroDivisionError."""
    run = profile_run(tmp_path / "run", {t: (9, 9 if t == T3 else 0) for t in TEMPLATES})
    out = tmp_path / "next.yaml"
    assert curriculum(run, "demo/rl", out) == 0  # the command, the demo's own spec
    printed = capsys.readouterr().out
    assert "no template share can exceed 25.0%: L-Clk 42.9% -> 25.0%" in printed
    assert "L-Clk 42.9 (realised 25.0)" in printed
    level = load_spec(out).levels[0]
    assert level.tasks_per_scene == 4 and min(level.tasks.values()) > 0
    realised = realised_shares(level.tasks, level.tasks_per_scene)  # what the written spec gives
    assert realised[T3] == pytest.approx(0.25, abs=1e-4)
    assert realised[T1] == pytest.approx(0.125, abs=1e-4)  # the other six share the rest evenly


def test_fitting_never_divides_by_zero_and_reaches_what_can_be_reached():
    target = {"a": 0.6, "b": 0.3, "c": 0.05, "d": 0.05}
    for k in (1, 2, 3, 4):
        weights = fit_draw_weights(target, k)  # the raw target: 0.6 is above 1/k for k >= 2
        assert all(0 < w < float("inf") for w in weights.values())
        reachable = reachable_shares(target, k)
        assert realised_shares(fit_draw_weights(reachable, k), k) == pytest.approx(reachable, abs=1e-6)
    assert realised_shares({}, 2) == {} and fit_draw_weights({}, 2) == {}


# -- the property: any failure profile ---------------------------------------------

profiles = st.lists(
    st.integers(0, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
    min_size=len(TEMPLATES),
    max_size=len(TEMPLATES),
)
ALL = (9, 9)
NONE = (9, 0)


@functools.cache
def source_spec(k: int):
    import yaml

    raw = yaml.safe_load(SPEC)
    return spec_from_dict({**raw, "tasks_per_scene": k}, Path("source.yaml"))


def probe_run(profile: list[tuple[int, int]], cases: frozenset[str]) -> Run:
    items, i = [], 0
    for template, (n, fails) in zip(TEMPLATES, profile):
        local = template not in (T1, T1B)
        for j in range(n):
            case = sorted(cases)[j % len(cases)] if local else None
            family, subset = "attribute", "rosetrain-attribute"
            items.append(Item(f"i{i}", j >= fails, template, case, family, subset, "custom", 1 + j % 2))
            i += 1
    return Run("probe", tuple(items), 0)


def check_axis(axis, rule: Rule) -> None:
    """Shares sum to 1; an unmeasured value keeps at most its source share and never
    more than a measured value that failed; the floor and the cap hold where they can."""
    shares = axis.shares
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9)
    assert all(s >= 0 for s in shares.values())
    source_total = sum(axis.source_shares.get(v, 0.0) for v in axis.cells)
    unmeasured = [v for v, c in axis.cells.items() if c.n == 0]
    failed = [v for v, c in axis.cells.items() if c.n and c.fails]
    for value in unmeasured:
        assert shares[value] <= axis.source_shares.get(value, 0.0) / source_total + 1e-9
        assert all(shares[value] <= shares[f] + 1e-9 for f in failed), (value, shares)
    measured = [v for v, c in axis.cells.items() if c.n]
    low, high = rule.floor / len(shares), rule.cap / len(shares)
    if any(shares[v] > high + 1e-9 for v in measured):  # only where every measured one is at the cap
        assert all(shares[v] >= high - 1e-9 for v in measured)
    if any(shares[v] < low - 1e-9 for v in measured):  # only where every measured one is at the floor
        assert all(shares[v] <= low + 1e-9 for v in measured)


@settings(max_examples=60, deadline=None)
@given(
    profile=profiles,
    k=st.integers(1, len(TEMPLATES)),
    cases=st.frozensets(st.sampled_from(CASES), min_size=1),
    mode=st.sampled_from(MODES),
    floor=st.sampled_from((0.0, 0.5, 1.0)),
    cap=st.sampled_from((1.0, 3.0, 10.0)),
)
@example(profile=[NONE, NONE, ALL, NONE, NONE, NONE, NONE], k=4, cases=frozenset(CASES),
         mode="failures", floor=0.5, cap=3.0)  # fmt: skip
@example(profile=[ALL] * 7, k=4, cases=frozenset(CASES), mode="failures", floor=0.5, cap=3.0)
@example(profile=[NONE] * 7, k=4, cases=frozenset(CASES), mode="failures", floor=0.5, cap=3.0)
@example(profile=[NONE, NONE, ALL, NONE, NONE, NONE, NONE], k=7, cases=frozenset(CASES),
         mode="failures", floor=0.5, cap=3.0)  # fmt: skip
@example(profile=[ALL] * 5 + [(0, 0)] * 2, k=4, cases=frozenset({"partial"}),
         mode="failures", floor=0.5, cap=3.0)  # fmt: skip
@example(profile=[(9, 5)] + [(0, 0)] * 6, k=2, cases=frozenset(CASES),
         mode="balanced", floor=0.0, cap=10.0)  # fmt: skip
def test_any_failure_profile_gives_a_sound_curriculum(profile, k, cases, mode, floor, cap):
    if not any(n for n, _ in profile):
        return  # read_run refuses a run without items before any weighting
    rule = Rule(mode=mode, floor=floor, cap=cap)
    plan = plan_curriculum(probe_run(profile, cases), source_spec(k), rule, "next.yaml")  # validates
    for name in AXES:
        if plan.axes[name].expressible:
            check_axis(plan.axes[name], rule)
    template = plan.axes["template"]
    level = plan.spec_dict["levels"][0]
    draws = level["tasks_per_scene"]
    assert all(w > 0 for w in level["tasks"].values()) and draws <= len(level["tasks"])
    realised = template.realised
    assert sum(realised.values()) == pytest.approx(1.0) and max(realised.values()) <= 1 / draws + 1e-9
    assert realised == pytest.approx(realised_shares(level["tasks"], draws), abs=1e-12)  # the written spec's
    if not template.expressible:  # k = n: every template on every scene
        assert k == len(template.shares) and realised == pytest.approx(dict.fromkeys(template.shares, 1 / k))
        return
    wanted = {t: s for t, s in template.shares.items() if s > 0}
    assert realised == pytest.approx(reachable_shares(wanted, draws), abs=1e-4)
    if max(wanted.values()) <= 1 / draws:
        assert realised == pytest.approx(wanted, abs=1e-4)  # reachable: the chosen shares themselves


# -- cells that were not measured ---------------------------------------------------


def test_unmeasured_cells_keep_the_source_share_below_measured_failures(tmp_path, spec, capsys):
    """The issue's run: an eval without --bridges leaves G-Clk and mL-Cnt at 0 items;
    the five measured templates failed 9 of 9. A pooled guess gave the unmeasured
    15.1% each, above the measured failures' 14.0%."""
    run = profile_run(tmp_path / "run", {t: ALL for t in (T1, T2, T3, T4, T5)})
    out = tmp_path / "next.yaml"
    assert curriculum(run, spec, out) == 0
    shares = make_curriculum(run, spec, out).axes["template"].shares
    measured = min(shares[t] for t in (T1, T2, T3, T4, T5))
    assert shares[T2B] == pytest.approx(1 / 11)  # mL-Cnt: the source's 1 of 11, under the others
    assert shares[T1B] == pytest.approx(measured)  # G-Clk: the source's 2/11, lowered to them
    printed = capsys.readouterr().out
    assert f"{SHORT_NAME[T2B]} 9.1" in printed


def test_an_unmeasured_cell_keeps_its_source_share():
    counts = {"A": (10, 5), "B": (10, 1), "C": (0, 0)}
    shares = axis_shares(counts, Rule(floor=0.0, cap=10.0), {"A": 0.2, "B": 0.2, "C": 0.6})
    assert shares["C"] == pytest.approx(shares["B"])  # 0.6 is above B's share: held to it
    shares = axis_shares(counts, Rule(floor=0.0, cap=10.0), {"A": 0.45, "B": 0.45, "C": 0.1})
    assert shares["C"] == pytest.approx(0.1)  # under every failed share: kept
    assert shares["A"] / shares["B"] == pytest.approx((6 / 12) / (2 / 12))  # the rest by the rule


def test_an_axis_the_run_did_not_measure_keeps_the_source(tmp_path, spec):
    """Global templates only: no item has a region case; the source's are kept."""
    run = profile_run(tmp_path / "run", {T1: (6, 3), T1B: (6, 1)})
    plan = make_curriculum(run, spec, tmp_path / "next.yaml")
    assert plan.axes["region_case"].shares == pytest.approx({"zero": 0.33, "partial": 0.4, "all": 0.27})


# -- options that weight nothing or overwrite the report ------------------------------


@pytest.mark.parametrize("axes", ["", ",,", " , "])
def test_an_empty_axes_list_is_refused(tmp_path, spec, capsys, axes):
    run = profile_run(tmp_path / "run", {T3: ALL})
    out = tmp_path / "next.yaml"
    assert curriculum(run, spec, out, "--axes", axes) == 2
    line = one_line(capsys.readouterr().err)
    assert "--axes" in line and "names no axis" in line
    assert not out.exists() and not (tmp_path / "next-report").exists()
    with pytest.raises(RosetrainError, match="^axes: "):
        Rule(axes=())


@pytest.mark.parametrize("name", ["report.md", "curriculum.png", ".rosetrain.json", "./report.md", ""])
def test_out_may_not_be_a_file_the_command_writes(tmp_path, spec, capsys, name):
    """`--out R/report.md --report R`: the spec replaced the report just written."""
    run = profile_run(tmp_path / "run", {T3: ALL})
    report = tmp_path / "R"
    out = f"{report}/{name}" if name else str(report)
    assert curriculum(run, spec, out, "--report", str(report)) == 2  # as typed: R/./report.md too
    line = one_line(capsys.readouterr().err)
    assert "(option --out)" in line and "report folder" in line
    assert not report.exists()  # refused before anything was written
    with pytest.raises(RosetrainError, match="^out "):
        make_curriculum(run, spec, Path(out), report_dir=report)


def test_a_spec_beside_the_report_files_is_fine(tmp_path, spec):
    run = profile_run(tmp_path / "run", {T3: ALL, T1: NONE})
    report = tmp_path / "R"
    make_curriculum(run, spec, report / "next.yaml", report_dir=report)
    assert load_spec(report / "next.yaml").levels and (report / "report.md").is_file()
