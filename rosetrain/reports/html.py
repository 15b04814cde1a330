"""report.md as one self-contained HTML page that opens in any browser.

rosetrain's reports are Markdown with PNG plots beside them; a browser shows
neither the table nor the plots of a .md file. The page written here holds the
same text and tables, and the plots inline (data: URIs), so it can be opened,
mailed or attached as one file. Only the Markdown rosetrain writes is read:
headings, paragraphs, pipe tables, images, **bold** and `code`.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr:nth-child(even) td { background: #f6f6f6; }
img { max-width: 100%; display: block; margin: 1em 0; }
code { background: #f0f0f0; padding: 0 0.2em; overflow-wrap: anywhere; }
"""
IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)$")


def inline(text: str) -> str:
    """Escaped text with **bold** and `code`."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def table(rows: list[str]) -> str:
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    head, body = cells[0], cells[2:]  # cells[1] is the |---| rule
    lines = ["<table>", "<tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"]
    lines += ["<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in body]
    return "\n".join(lines + ["</table>"])


def image(alt: str, name: str, folder: Path) -> str:
    """A PNG beside the report, inlined; a missing one stays a plain link."""
    path = folder / name
    if not path.is_file():
        return f'<p><a href="{html.escape(name)}">{html.escape(alt or name)}</a></p>'
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def blocks(lines: Iterable[str]) -> Iterator[list[str]]:
    """Runs of non-blank lines; a table and an image line are blocks of their own."""
    block: list[str] = []
    for line in lines:
        if IMAGE.match(line.strip()):
            yield from [block] if block else []
            yield [line.strip()]
            block = []
        elif not line.strip():
            yield from [block] if block else []
            block = []
        elif block and line.startswith("|") != block[-1].startswith("|"):
            yield block
            block = [line]
        else:
            block.append(line)
    if block:
        yield block


def render_block(block: list[str], folder: Path) -> str:
    first = block[0]
    if first.startswith("#"):
        level = len(first) - len(first.lstrip("#"))
        title = f"<h{level}>{inline(first[level:].strip())}</h{level}>"
        return title + ("\n" + render_block(block[1:], folder) if block[1:] else "")
    if first.startswith("|"):
        return table(block)
    found = IMAGE.match(first)
    if found:
        return image(found.group(1), found.group(2), folder)
    # Markdown breaks a line only where it ends in two spaces
    return (
        "<p>"
        + "\n".join(inline(line.rstrip()) + ("<br>" if line.endswith("  ") else "") for line in block)
        + "</p>"
    )


def markdown_to_html(markdown: str, folder: str | Path, title: str) -> str:
    """The page for ``markdown`` whose images lie in ``folder``."""
    body = "\n".join(render_block(b, Path(folder)) for b in blocks(markdown.splitlines()))
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
