"""A second, deliberately plain implementation of the official ROSE v0.1 per-item
row, written from the evaluator's documented behaviour, to test rosetrain's
scorer against (``tests/test_scoring_official.py``).

It shares no code with ``rosetrain.scoring``: it reads a response token by
token with ``re``'s own case folding and digit class, and computes every
field from scratch with plain sets.
"""

from __future__ import annotations

import re

SPACE = r"\s*"
CLICK_TOKEN = re.compile(r"\s*click\s*\(\s*r\s*(\d+)\s*,\s*c\s*(\d+)\s*\)\s*", re.IGNORECASE)
COUNT_ANSWER = re.compile(r"\s*count\s*\(\s*(\d+)\s*\)\s*", re.IGNORECASE)
SUBMIT_TOKEN = re.compile(r"\s*submit\s*\(\s*(\d+)\s*\)\s*", re.IGNORECASE)
DONE_TOKEN = re.compile(r"\s*done\s*", re.IGNORECASE)
LOCAL_MAIN = {
    "T2_COUNT_LOCAL_NUMERIC",
    "T3_CLICK_LOCAL_NUMERIC",
    "T4_CLICK_VISUAL_REGION",
    "T5_CLICK_COUNT_EXCLUSION",
}


def read(raw, mode):
    """(valid, code, count_or_submit, clicks, rejected tokens)."""
    text = "" if raw is None else str(raw).strip()
    if not text:
        return False, "empty", None, [], []
    if mode == "COUNT":
        m = COUNT_ANSWER.fullmatch(text)
        return (
            (True, None, int(m.group(1)), [], []) if m else (False, "expected_COUNT_only", None, [], [text])
        )
    tokens = [t.strip() for t in text.split(";") if t.strip()]
    if mode == "CLICK_COUNT" and not tokens:
        return False, "empty", None, [], []
    end = (DONE_TOKEN if mode == "CLICK" else SUBMIT_TOKEN).fullmatch(tokens[-1]) if tokens else None
    if end is None:
        return False, "missing_DONE" if mode == "CLICK" else "missing_SUBMIT", None, [], tokens
    submit = int(end.group(1)) if mode == "CLICK_COUNT" else None
    clicks, rejected = [], []
    for token in tokens[:-1]:
        m = CLICK_TOKEN.fullmatch(token)
        if m:
            clicks.append((int(m.group(1)), int(m.group(2))))
        else:
            rejected.append(token)
    if rejected:
        return False, "invalid_CLICK_token", submit, clicks, rejected
    return True, None, submit, clicks, []


def cells(labels):
    out = set()
    for label in labels or []:
        r, c = label.split(",")
        out.add((int(r.strip()[1:]), int(c.strip()[1:])))
    return out


def region(item):
    rows, cols = item["rows"], item["cols"]
    kind, p = item["region_type"], item.get("region_params") or {}
    grid = {(r, c) for r in range(1, rows + 1) for c in range(1, cols + 1)}
    if kind == "EXCLUSION":
        inner = {**item, "region_type": p["exclude_type"], "region_params": p["exclude_params"]}
        return grid - region(inner)
    r1, r2 = (p["r1"], p["r2"]) if "r1" in p else (1, rows)
    c1, c2 = (p["c1"], p["c2"]) if "c1" in p else (1, cols)
    return {(r, c) for (r, c) in grid if r1 <= r <= r2 and c1 <= c <= c2}


def label(cell):
    return f"R{cell[0]},C{cell[1]}"


def prf(pred, gold):
    if not pred and not gold:
        return 1.0, 1.0, 1.0, 1.0
    if not pred or not gold:
        return 0.0, 0.0, 0.0, len(pred & gold) / len(pred | gold)
    hit = len(pred & gold)
    p, r = hit / len(pred), hit / len(gold)
    return p, r, (2 * p * r / (p + r) if hit else 0.0), hit / len(pred | gold)


def expected_row(item, raw, model, error):
    mode, template = item["task_mode"], item["task_template"]
    rows, cols = item["rows"], item["cols"]
    valid, code, number, clicks, rejected = read(raw, mode)
    inside = [c for c in clicks if 1 <= c[0] <= rows and 1 <= c[1] <= cols]
    outside = [c for c in clicks if c not in inside]
    pred = set(inside)
    dups = len(inside) - len(pred)
    gold = cells(item["ground_truth_clicks"])
    everything = cells(item["all_target_cells"])
    listed = cells(item.get("region_target_cells") or item["ground_truth_clicks"])
    distractors = everything - listed
    area = region(item)
    n_gold = int(item["ground_truth_count"] or 0)
    is_click, is_count, is_submit = mode != "COUNT", mode != "CLICK", mode == "CLICK_COUNT"
    clean = valid and not outside and not dups
    p, r, f1, iou = prf(pred, gold)
    pc = number if is_count else None
    missed = gold - pred
    near = sum(1 for g in missed if any(abs(g[0] - q[0]) + abs(g[1] - q[1]) <= 1 for q in pred))
    count_soft = (1 / (1 + abs(pc - n_gold)) if pc is not None else 0.0) if is_count else None
    consistent = (int(number is not None and number == len(pred))) if is_submit else None
    if mode == "COUNT":
        passed, soft = valid and pc == n_gold, count_soft
    elif mode == "CLICK":
        passed, soft = clean and pred == gold, f1 if clean else 0.0
    else:
        passed = clean and pred == gold and number == n_gold and number == len(pred)
        soft = ((f1 if clean else 0.0) + count_soft + consistent) / 3
    g_count, g_click = False, False
    if template in LOCAL_MAIN:
        g_count = is_count and pc is not None and n_gold != len(everything) and pc == len(everything)
        g_click = is_click and gold != everything and pred == everything
    excl = 0
    if item["region_type"] == "EXCLUSION":
        excl = (
            int(bool(pred & distractors))
            if is_click
            else int(pc is not None and n_gold != len(everything) and pc == len(everything))
        )

    def click(v):
        return v if is_click else None

    return {
        "item_id": item["item_id"],
        "scene_id": item.get("scene_id"),
        "image_id": item.get("image_id"),
        "model": model,
        "rose_subset": item.get("rose_subset"),
        "rose_split": item.get("split"),
        "primitive_type": item.get("primitive_type"),
        "task_template": template,
        "task_mode": mode,
        "region_type": item["region_type"],
        "region_case": item.get("region_case"),
        "cue_type": item.get("cue_type"),
        "difficulty": item.get("difficulty"),
        "rows": rows,
        "cols": cols,
        "region_cell_count": len(area),
        "raw_text": raw,
        "api_error": int(error not in (None, "", "None")),
        "api_error_text": error,
        "format_valid": int(valid),
        "format_error": int(not valid),
        "parse_error": code,
        "invalid_action_tokens": rejected,
        "pass": int(passed),
        "unified_soft": soft,
        "count_applicable": int(is_count),
        "click_applicable": int(is_click),
        "submit_applicable": int(is_submit),
        "gt_count": n_gold,
        "pred_count": pc,
        "count_exact": (int(pc == n_gold) if pc is not None else 0) if is_count else None,
        "count_mae": None if pc is None else abs(pc - n_gold),
        "count_bias": None if pc is None else pc - n_gold,
        "count_soft": count_soft,
        "gt_clicks": sorted(map(label, gold)),
        "pred_clicks_all": [label(c) for c in clicks],
        "pred_clicks_valid": [label(c) for c in inside],
        "pred_clicks_valid_unique": sorted(map(label, pred)),
        "pred_clicks_invalid": [label(c) for c in outside],
        "pred_click_count_raw": len(clicks),
        "pred_click_count_valid": len(inside),
        "pred_click_count_unique": len(pred),
        "invalid_coordinate_count": click(len(outside)),
        "duplicate_click_count": click(dups),
        "click_exact_set": click(int(pred == gold)),
        "click_exact_set_strict": click(int(clean and pred == gold)),
        "click_precision": click(p),
        "click_recall": click(r),
        "click_f1": click(f1),
        "click_f1_strict": click(f1 if clean else 0.0),
        "click_iou": click(iou),
        "click_iou_strict": click(iou if clean else 0.0),
        "submit_count": number if is_submit else None,
        "submit_exact": int(number is not None and number == n_gold) if is_submit else None,
        "click_submit_consistency": consistent,
        "region_violation_count": click(len(pred - area)),
        "region_ok": click(int(pred <= area)),
        "outside_distractor_hit_count": click(len(pred & distractors)),
        "missed_target_count": click(len(missed)),
        "false_positive_count": click(len(pred - gold)),
        "over_click_count": click(max(0, len(pred) - n_gold)),
        "under_click_count": click(max(0, n_gold - len(pred))),
        "near_miss_count": click(near),
        "near_miss_rate": click(near / max(1, len(gold))),
        "global_default_error": int(g_count or g_click),
        "exclusion_failure": excl,
        "all_target_cells": sorted(map(label, everything)),
        "region_target_cells": sorted(map(label, listed)),
        "out_region_target_cells": sorted(map(label, distractors)),
        "ground_truth_formal_answer": item.get("ground_truth_formal_answer"),
    }
