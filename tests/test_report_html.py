"""`rosetrain compare` writes report.html: report.md's tables and text with the
plots inline, one file a browser opens."""

from __future__ import annotations

import base64
import json
import random
from html.parser import HTMLParser

from rosetrain.cli import main as cli_main
from rosetrain.reports.html import markdown_to_html

SPEC = """
name: html-report
role: eval
namespace: html-report
seed: 4
rows: [4, 5]
cols: [4, 5]
cell_size: [28, 28]
image_multiple: 28
exceptions: [1, 3]
negative_rate: 0.0
families: [attribute]
"""


class Page(HTMLParser):
    """What a browser would show: table rows, images (src), headings, and text."""

    def __init__(self):
        super().__init__()
        self.rows, self.images, self.headings, self.text = [], [], [], []
        self._row, self._tag = None, None

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        if tag == "tr":
            self._row = []
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._row is not None and data.strip():
            self._row.append(data.strip())
        elif self._tag in ("h1", "h2"):
            self.headings.append(data.strip())
        self.text.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def predictions(rows, path, right_share: float, seed: int):
    rng = random.Random(seed)
    path.write_text(
        "".join(
            json.dumps(
                {
                    "item_id": r["item_id"],
                    "model": "m",
                    "error": None,
                    "raw_text": r["answer"] if rng.random() < right_share else "DONE",
                }
            )
            + "\n"
            for r in rows
        )
    )


def test_compare_writes_a_self_contained_html_report(tmp_path, write_spec, release_split):
    data = release_split(write_spec(tmp_path, SPEC), tmp_path / "data", scenes=12)
    rows = [json.loads(line) for line in (data / "metadata_test.jsonl").read_text().splitlines()]
    for name, share, seed in (("before", 0.3, 1), ("after", 0.8, 2)):
        predictions(rows, tmp_path / f"{name}.jsonl", share, seed)
        assert (
            cli_main(
                [
                    "score",
                    "--data",
                    str(data),
                    "--split",
                    "test",
                    "--predictions",
                    str(tmp_path / f"{name}.jsonl"),
                    "--out",
                    str(tmp_path / name),
                ]
            )
            == 0
        )
    out = tmp_path / "cmp"
    assert cli_main(["compare", str(tmp_path / "before"), str(tmp_path / "after"), "--out", str(out)]) == 0

    page = parse((out / "report.html").read_text(encoding="utf-8"))
    compared = json.loads((out / "compare.json").read_text())
    table = {row[0]: row[1:] for row in page.rows}
    for template, entry in compared["templates"].items():
        before, after = table[f"{entry['short']} ({template})"][:2]
        assert (float(before.split()[0]), float(after.split()[0])) == (  # each beside its interval
            round(100 * entry["before"], 1),
            round(100 * entry["after"], 1),
        )
    assert "Gap (Counting - Action)" in table and page.headings[0] == "Before/after comparison"
    plots = sorted(p.name for p in out.glob("*.png"))
    assert len(page.images) == len(plots) == 3
    inlined = sorted(base64.b64decode(src.split(",", 1)[1]) for src in page.images)
    assert inlined == sorted((out / name).read_bytes() for name in plots)  # no file needed beside it


def test_markdown_subset_renders_escaped_text_breaks_and_missing_images_as_links(tmp_path):
    markdown = (
        "# Title <x>\n\nfirst `a<b>` line  \nsecond **bold** line\njoined\n\n"
        "| k | v |\n|---|---|\n| a & b | 1 |\n\n![plot](missing.png)\n"
    )
    page_html = markdown_to_html(markdown, tmp_path, "t")
    assert "<h1>Title &lt;x&gt;</h1>" in page_html
    assert (
        "<p>first <code>a&lt;b&gt;</code> line<br>\nsecond <strong>bold</strong> line\njoined</p>"
        in page_html
    )
    assert parse(page_html).rows == [["k", "v"], ["a & b", "1"]]
    assert '<a href="missing.png">plot</a>' in page_html
    assert markdown_to_html(markdown, tmp_path, "t") == page_html  # same input, same bytes
