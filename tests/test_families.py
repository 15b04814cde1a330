"""Behaviour of the six visual families behind rosetrain.generators.families.base."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys

import pytest
from PIL import ImageChops

from rosetrain.core.errors import RosetrainError
from rosetrain.generators.families import FAMILIES, get_family
from rosetrain.generators.families.common import item_key, mean_abs_diff
from rosetrain.generators.families.fonts import resolve_font

NAMES = sorted(FAMILIES)
FONT_NEEDS = {"emoji_content": "Noto Color Emoji", "emoji_style": "Noto Color Emoji"}


def family(name: str, **config):
    needed = FONT_NEEDS.get(name)
    if needed and resolve_font(needed) is None:
        pytest.skip(f"{needed} is not installed (apt-get install fonts-noto-color-emoji)")
    fam = get_family(name, config)
    fam.check_available()
    return fam


def items(fam, n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [fam.sample_item(rng) for _ in range(n)]


def digest(cells) -> str:
    return hashlib.sha256(b"".join(cell.tobytes() for cell in cells)).hexdigest()


@pytest.mark.parametrize("name", NAMES)
def test_items_are_deterministic_and_json(name):
    fam = family(name)
    first, again = items(fam, 12, seed=5), items(family(name), 12, seed=5)
    assert [item_key(i) for i in first] == [item_key(i) for i in again]
    assert [item_key(i) for i in first] != [item_key(i) for i in items(fam, 12, seed=6)]
    for item in first:
        assert json.loads(json.dumps(item)) == item
        json.dumps(fam.describe(item))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("cell_size", [24, 42, 64, 160])
def test_cells_are_rgb_squares_that_differ(name, cell_size):
    fam = family(name, subtlety=1.0)  # the hardest setting must still differ
    for item in items(fam, 8, seed=cell_size):
        majority, exception = fam.draw_cells(item, cell_size)
        for cell in (majority, exception):
            assert cell.mode == "RGB" and cell.size == (cell_size, cell_size)
        assert ImageChops.difference(majority, exception).getbbox() is not None


@pytest.mark.parametrize("name", NAMES)
def test_same_item_gives_same_bytes_without_the_cache(name):
    item = items(family(name), 3, seed=11)[2]
    shuffled = json.loads(json.dumps(item, sort_keys=True))  # other key order, same item
    assert digest(family(name).draw_cells(item, 56)) == digest(family(name).draw_cells(shuffled, 56))


def test_bytes_repeat_across_processes():
    """A fresh interpreter with another hash seed draws byte-identical cells."""
    script = (
        "import hashlib, json, random, sys\n"
        "from rosetrain.generators.families import FAMILIES, get_family\n"
        "from rosetrain.generators.families.fonts import resolve_font\n"
        "out = {}\n"
        "for name in sorted(FAMILIES):\n"
        "    if name.startswith('emoji') and resolve_font('Noto Color Emoji') is None: continue\n"
        "    fam = get_family(name, {'subtlety': 0.7})\n"
        "    rng = random.Random(3)\n"
        "    cells = [c for _ in range(3) for c in fam.draw_cells(fam.sample_item(rng), 48)]\n"
        "    out[name] = hashlib.sha256(b''.join(c.tobytes() for c in cells)).hexdigest()\n"
        "print(json.dumps(out, sort_keys=True))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] and json.loads(runs[0])


@pytest.mark.parametrize("name", NAMES)
def test_subtlety_makes_the_exception_closer(name):
    def mean_difference(subtlety: float) -> float:
        fam = family(name, subtlety=subtlety)
        return sum(mean_abs_diff(*fam.draw_cells(item, 64)) for item in items(fam, 40, seed=1)) / 40

    assert mean_difference(1.0) < mean_difference(0.0)


def test_cached_cells_are_copies():
    fam = family("attribute")
    item = items(fam, 1)[0]
    first = fam.draw_cells(item, 32)
    first[0].paste((0, 0, 0), (0, 0, 32, 32))
    assert fam.draw_cells(item, 32)[0].getextrema() != ((0, 0),) * 3


@pytest.mark.parametrize("script", ["latin", "cjk"])
def test_glyph_never_draws_an_identical_pair(script):
    if script == "cjk" and resolve_font("Noto Sans CJK SC") is None:
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk)")
    for subtlety in (0.0, 0.5, 1.0):
        fam = family("glyph", script=script, subtlety=subtlety)
        for item in items(fam, 60, seed=2):
            assert item["script"] == script and item["background_char"] != item["target_char"]
            for cell_size in (24, 64):
                assert ImageChops.difference(*fam.draw_cells(item, cell_size)).getbbox() is not None


def test_glyph_skips_pairs_a_font_draws_alike():
    """Latin O and Greek Omicron are one glyph in DejaVu Sans: never offered there."""
    fam = family("glyph", script="latin", fonts=["DejaVu Sans"], subtlety=1.0)
    pairs = {frozenset((i["background_char"], i["target_char"])) for i in items(fam, 300)}
    assert frozenset("OΟ") not in pairs and len(pairs) > 5
    assert all(i["font_name"] == "DejaVu Sans Book" for i in items(fam, 5))


def test_glyph_any_mixes_scripts_and_one_font_per_scene():
    if resolve_font("Noto Sans CJK SC") is None:
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk)")
    scene_items = items(family("glyph", script="any"), 60)
    assert {i["script"] for i in scene_items} == {"latin", "cjk"}
    assert len({(i["font_file"], i["font_index"]) for i in scene_items}) > 2


@pytest.mark.parametrize(
    "config, words",
    [
        ({"fonts": ["No Such Font XYZ"]}, ["glyph", "No Such Font XYZ", "not installed"]),
        (
            {"fonts": ["/nonexistent/NotoSansCJK.ttc#2"], "script": "cjk"},
            ["/nonexistent/NotoSansCJK.ttc#2", "apt-get install fonts-noto-cjk"],
        ),
        ({"fonts": ["DejaVu Sans"], "script": "cjk"}, ["cjk", "apt-get install fonts-noto-cjk"]),
    ],
)
def test_missing_glyph_font_is_a_clear_error(config, words):
    fam = get_family("glyph", config)
    with pytest.raises(RosetrainError) as error:
        fam.check_available()
    assert all(word in str(error.value) for word in words), str(error.value)
    with pytest.raises(RosetrainError):
        fam.sample_item(random.Random(0))


@pytest.mark.parametrize("name", ["emoji_content", "emoji_style"])
def test_missing_emoji_font_is_a_clear_error(name):
    with pytest.raises(
        RosetrainError, match=f"{name}.*No Emoji Font.*apt-get install fonts-noto-color-emoji"
    ):
        get_family(name, {"font": "No Emoji Font"}).check_available()


@pytest.mark.parametrize(
    "name, config, field",
    [
        ("glyph", {"subtlety": 1.5}, "subtlety"),
        ("glyph", {"script": "greek"}, "script"),
        ("glyph", {"fonts": "DejaVu Sans"}, "fonts"),
        ("emoji_style", {"styles": ["sepia"]}, "styles"),
        ("emoji_content", {"render_size": 0}, "render_size"),
        ("sprite_edit", {"sizes": [12, 6]}, "sizes"),
        ("attribute", {"attributes": ["texture"]}, "attributes"),
        ("attribute", {"shapes": ["circle"]}, "shapes"),
        ("attribute", {"hue_range": [200, 100]}, "hue_range"),
        ("attribute", {"swap_roles": "no"}, "swap_roles"),
        ("attribute", {"hue_exclude": [50, 150]}, "hue_exclude"),
        ("attribute", {"hue_exclude": [[150, 50]]}, "hue_exclude"),
        ("attribute", {"hue_exclude": [[0, 400]]}, "hue_exclude"),
        ("attribute", {"hue_range": [60, 140], "hue_exclude": [[50, 150]]}, "hue_exclude"),
        # every majority hue allowed, but each partner (plus or minus 150 degrees) falls in a band
        (
            "attribute",
            {
                "attributes": ["hue"],
                "subtlety": 0.0,
                "hue_range": [0, 20],
                "hue_exclude": [[140, 180], [200, 240]],
            },
            "hue_exclude",
        ),
    ],
)
def test_bad_config_names_the_field(name, config, field):
    with pytest.raises(ValueError, match=field):
        get_family(name, config)


def test_sprite_edit_changes_exactly_edit_pixels_and_fewer_when_subtle():
    counts = {}
    for subtlety in (0.0, 1.0):
        for item in items(family("sprite_edit", subtlety=subtlety), 20):
            changed = sum(a != b for ra, rb in zip(item["majority"], item["target"]) for a, b in zip(ra, rb))
            assert changed == item["edit_pixels"] >= 1
            counts.setdefault(subtlety, []).append(changed)
    assert set(counts[1.0]) == {1} and min(counts[0.0]) > 5


def test_sprite_pair_keeps_the_silhouette_when_subtle_and_not_when_easy():
    def same_silhouette(item) -> bool:
        return [[ch != "0" for ch in row] for row in item["majority"]] == [
            [ch != "0" for ch in row] for row in item["target"]
        ]

    subtle, easy = (
        items(family("sprite_pair", subtlety=1.0), 40),
        items(family("sprite_pair", subtlety=0.0), 40),
    )
    assert all(item["majority"] != item["target"] for item in subtle + easy)
    # Only a sprite with almost no inner pixels needs its outline redrawn to change.
    assert sum(map(same_silhouette, subtle)) >= 36 and sum(map(same_silhouette, easy)) <= 4


def test_attribute_exception_differs_in_exactly_one_attribute():
    fields = {"hue": {"hue"}, "size": {"size"}, "rotation": {"rotation"}, "shape": {"shape", "rotation"}}
    seen = set()
    for item in items(family("attribute"), 80):
        changed = {k for k in item["majority"] if item["majority"][k] != item["target"][k]}
        assert changed and changed <= fields[item["attribute"]], item
        assert "shape" in changed or item["majority"]["shape"] == item["target"]["shape"]
        seen.add(item["attribute"])
    assert seen == set(fields)


def test_attribute_hue_range_holds_the_majority_unless_roles_swap():
    def in_range(item) -> bool:
        return 170 <= item["majority"]["hue"] <= 200

    kept = items(family("attribute", attributes=["hue"], hue_range=[170, 200], swap_roles=False), 40)
    swapped = items(family("attribute", attributes=["hue"], hue_range=[170, 200]), 40)
    assert all(map(in_range, kept))
    assert 5 <= sum(map(in_range, swapped)) <= 35  # either look may be the majority


@pytest.mark.parametrize("swap_roles", [True, False])
def test_attribute_hue_exclude_keeps_both_looks_out_of_the_band(swap_roles):
    config = {
        "attributes": ["hue", "size"],
        "subtlety": 0.0,
        "hue_exclude": [[50, 150], [300, 310]],
        "swap_roles": swap_roles,
    }
    drawn = items(family("attribute", **config), 300)
    hues = [item[look]["hue"] for item in drawn for look in ("majority", "target")]
    assert not [h for h in hues if 50 <= h <= 150 or 300 <= h <= 310]
    # the rest of the wheel is still drawn, on both sides of the band
    assert min(hues) < 50 and any(150 < h < 300 for h in hues) and max(hues) > 310
    hue_items = [item for item in drawn if item["attribute"] == "hue"]
    assert all(round(abs(i["majority"]["hue"] - i["target"]["hue"]), 2) in (150.0, 210.0) for i in hue_items)


def test_attribute_hue_exclude_is_deterministic_and_changes_nothing_when_empty():
    assert items(family("attribute", hue_exclude=[[50, 150]]), 30) == items(
        family("attribute", hue_exclude=[[50, 150]]), 30
    )
    assert items(family("attribute", hue_exclude=[]), 30) == items(family("attribute"), 30)


def test_describe_has_release_style_fields():
    expected = {
        "glyph": {"background_char", "target_char", "font_name", "pair_key"},
        "emoji_content": {"background_emoji", "target_emoji", "pair_key"},
        "emoji_style": {"emoji_char", "majority_style", "target_style"},
        "sprite_edit": {"pair_key", "edit_pixels"},
        "sprite_pair": {"pair_key"},
        "attribute": {"attribute", "background_shape", "target_shape", "pair_key"},
    }
    for name, keys in expected.items():
        fam = family(name)
        assert keys <= set(fam.describe(items(fam, 1)[0])), name


def test_an_excluded_hue_band_wraps_the_hue_circle():
    """Hue 360 is hue 0: a band from 0 keeps 360 out, a band to 360 keeps 0 out,
    and no scene of such a config shows either look inside the band."""
    from_zero = get_family("attribute", {"attributes": ["hue"], "hue_exclude": [[0, 10]]}).config
    to_360 = get_family("attribute", {"attributes": ["hue"], "hue_exclude": [[350, 360]]}).config
    assert not from_zero.hue_allowed(360.0) and not from_zero.hue_allowed(0.0)
    assert not to_360.hue_allowed(0.0) and not to_360.hue_allowed(360.0) and not to_360.hue_allowed(355)
    assert from_zero.hue_allowed(20) and to_360.hue_allowed(20)
    config = {"attributes": ["hue"], "subtlety": 0.0, "hue_exclude": [[0, 10], [350, 360]]}
    for item in items(family("attribute", **config), 60):
        for look in ("majority", "target"):
            hue = item[look]["hue"] % 360
            assert not (hue <= 10 or hue >= 350), item


def test_hue_exclude_is_bounded_and_never_hangs():
    """10,000 bands are refused in one line; bands whose gaps are slivers (too narrow
    for any draw) are refused when configured, never looped over."""
    many = [[i * 0.03, i * 0.03 + 0.01] for i in range(10_000)]
    with pytest.raises(ValueError, match="hue_exclude: at most 64 bands, got 10,000"):
        get_family("attribute", {"hue_exclude": many})
    slivers = [[i * 5.0, i * 5.0 + 4.995] for i in range(64)]
    with pytest.raises(ValueError, match="hue_exclude"):
        get_family("attribute", {"attributes": ["hue"], "hue_range": [0, 320], "hue_exclude": slivers})


def test_a_one_hue_range_far_from_every_band_is_allowed():
    config = {"attributes": ["hue"], "subtlety": 0.0, "hue_range": [180, 180], "hue_exclude": [[60, 140]]}
    drawn = items(family("attribute", **config), 20)
    assert {item["majority"]["hue"] for item in drawn} | {item["target"]["hue"] for item in drawn} <= {
        180.0,
        30.0,
        330.0,
    }
    with pytest.raises(ValueError, match="leaves no hue"):
        get_family("attribute", {"hue_range": [100, 100], "hue_exclude": [[60, 140]]})


def test_a_config_list_is_of_distinct_known_names_so_bounded():
    with pytest.raises(ValueError, match="shapes: lists 'circle' more than once"):
        get_family("attribute", {"shapes": ["circle"] * 100_000})
    with pytest.raises(ValueError, match="styles: 'sepia' is not one of"):
        get_family("emoji_style", {"styles": ["sepia"]})


def test_a_spec_has_at_most_256_levels(tmp_path, write_spec):
    from rosetrain.generators.spec import SpecError, load_spec

    text = "name: x\nfamilies: [attribute]\ncurriculum: mixture\nlevels:\n" + "".join(
        f"  - name: l{i}\n" for i in range(20_000)
    )
    with pytest.raises(SpecError, match="levels: at most 256 levels, got 20,000"):
        load_spec(write_spec(tmp_path, text))


def _glyph_ranking(monkeypatch, cache, calls: list) -> tuple:
    """DejaVu Sans's latin ranking through the on-disk cache at ``cache``, with the
    in-process cache emptied first; ``calls`` gets one entry per real ranking."""
    from rosetrain.generators.families import glyph, rankings

    monkeypatch.setenv("ROSETRAIN_CACHE_DIR", str(cache))
    real = rankings.cached_ranking

    def counted(kind, font_file, settings, candidates, rank):
        return real(kind, font_file, settings, candidates, lambda: calls.append(kind) or rank())

    monkeypatch.setattr(glyph, "cached_ranking", counted)
    glyph.ranked_pairs.cache_clear()
    return glyph.ranked_pairs(resolve_font("DejaVu Sans"), "latin", 0.7)


def test_a_ranking_is_kept_between_runs_and_reads_back_the_same(tmp_path, monkeypatch):
    calls: list = []
    uncached = _glyph_ranking(monkeypatch, "off", calls)
    assert calls == ["glyph"] and not (tmp_path / "rankings").exists()
    first = _glyph_ranking(monkeypatch, tmp_path, calls)
    second = _glyph_ranking(monkeypatch, tmp_path, calls)
    assert uncached == first == second and len(first) > 5
    assert calls == ["glyph", "glyph"]  # the second run read the file
    (kept,) = (tmp_path / "rankings").iterdir()
    assert json.loads(kept.read_text()) == [list(pair) for pair in first]


@pytest.mark.parametrize(
    "damage",
    [
        "",
        "not json",
        "[1, 2]",
        '[["O", "0"], ["O", "0"]]',
        '[["A", "B"]]',
        "[[[1]]]",
        "{}",
        "[" * 100_000,
        "[" + " " * (1 << 22) + "]",
        "link",
    ],
)
def test_a_damaged_ranking_file_is_ranked_again_and_replaced(tmp_path, monkeypatch, damage):
    calls: list = []
    good = _glyph_ranking(monkeypatch, tmp_path, calls)
    (kept,) = (tmp_path / "rankings").iterdir()
    if damage == "link":  # a link to an endless file: never read, never written through
        kept.unlink()
        kept.symlink_to("/dev/zero")
    else:
        kept.write_text(damage)
    assert _glyph_ranking(monkeypatch, tmp_path, calls) == good and len(calls) == 2
    if damage == "link":
        assert os.readlink(kept) == "/dev/zero"
    else:
        assert json.loads(kept.read_text()) == [list(pair) for pair in good]


def test_a_ranking_key_holds_the_font_settings_and_candidates(tmp_path, monkeypatch):
    from rosetrain.generators.families.rankings import cached_ranking

    monkeypatch.setenv("ROSETRAIN_CACHE_DIR", str(tmp_path / "cache"))
    font = tmp_path / "font.ttf"  # a copy: its change time is the test's to move
    font.write_bytes(open(resolve_font("DejaVu Sans").file, "rb").read())
    pairs = (("a", "b"), ("c", "d"))
    assert cached_ranking("t", str(font), {"ratio": 0.7}, pairs, lambda: pairs) == pairs
    # each input changed is a new key: the stale answer is never read back
    assert cached_ranking("t", str(font), {"ratio": 0.6}, pairs, lambda: pairs[:1]) == pairs[:1]
    assert cached_ranking("t", str(font), {"ratio": 0.7}, pairs[1:], lambda: ()) == ()
    os.utime(font, ns=(1, 1))  # the font file replaced by another version
    assert cached_ranking("t", str(font), {"ratio": 0.7}, pairs, lambda: pairs[1:]) == pairs[1:]
    assert len(list((tmp_path / "cache" / "rankings").iterdir())) == 4


def test_an_unwritable_cache_folder_leaves_the_run_uncached(tmp_path, monkeypatch):
    from rosetrain.generators.families.rankings import cached_ranking

    blocker = tmp_path / "file"
    blocker.write_text("rosetrain's cache folder cannot be made under a file")
    monkeypatch.setenv("ROSETRAIN_CACHE_DIR", str(blocker / "cache"))
    font = resolve_font("DejaVu Sans").file
    assert cached_ranking("t", font, {}, (("a", "b"),), lambda: (("a", "b"),)) == (("a", "b"),)
    assert blocker.read_text().startswith("rosetrain's")


def test_without_the_ranking_code_to_hash_nothing_is_cached(tmp_path, monkeypatch):
    """A bytecode-only install cannot key a ranking by its code: it ranks every run."""
    from rosetrain.generators.families import rankings

    monkeypatch.setenv("ROSETRAIN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rankings, "_RANKING_CODE", ("no-such-module.py",))
    rankings._code_and_libraries.cache_clear()
    calls: list = []
    font = resolve_font("DejaVu Sans").file
    for _ in range(2):
        rankings.cached_ranking("t", font, {}, (("a", "b"),), lambda: calls.append(1) or (("a", "b"),))
    rankings._code_and_libraries.cache_clear()
    assert calls == [1, 1] and not (tmp_path / "rankings").exists()
