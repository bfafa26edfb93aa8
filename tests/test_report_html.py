"""REPORT.html (REPORT.md rendered; report.html's front page) opens on the result: its claims
as tables, no machine-local path; in a real headless browser too (opt-in: --slow, with a
Chromium on PATH, e.g. Debian's `chromium`)."""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser

import pytest

from lengen.report.report import write_html

from .conftest import ROOT
from .helpers import assert_opens_on_its_title, browser

SMOKE = ROOT / "reference" / "smoke"


class Cells(HTMLParser):
    """The text of every table cell, and the number of tables."""

    def __init__(self):
        super().__init__()
        self.tables, self.cells, self._in = 0, [], False

    def handle_starttag(self, tag, attrs):
        self.tables += tag == "table"
        if tag in ("td", "th"):
            self._in, self.cells = True, [*self.cells, ""]

    def handle_endtag(self, tag):
        self._in = self._in and tag not in ("td", "th")

    def handle_data(self, data):
        if self._in:
            self.cells[-1] += data


def rendered(tmp_path):
    out = tmp_path / "REPORT.html"
    write_html((SMOKE / "REPORT.md").read_text(), out)
    return out


def test_report_html_renders_every_claim_in_a_table(tmp_path):
    text = (SMOKE / "REPORT.md").read_text()
    page = rendered(tmp_path).read_text()
    cells = Cells()
    cells.feed(page)
    # every table: the rows, the scale table and the error-rate table
    heads = r"^\| *id *\||^\| *sentence|^\| *claim|^\| *experiment|^\| *runs per group"
    assert cells.tables == len(re.findall(heads, text, re.M)) > 0
    ids = re.findall(r"^\| (SP-\d[^|]*|PS-\d|VA-\d|TH-[^|]*|NL-[^|]*|MJ-\d) *\|", text, re.M)
    assert ids and {i.strip() for i in ids} <= {c.strip() for c in cells.cells}
    assert "<script" not in page and not re.search(r"/(work|home|tmp|Users)/", page)


@pytest.mark.slow
def test_report_html_opens_on_the_claims_in_a_headless_browser(tmp_path):
    """REPORT.html in a real browser: the claims table rendered, and at two window sizes its
    title at the top and its tables the page's width (tests/helpers.assert_opens_on_its_title;
    report.html, Snakemake's page around it, is checked the same way after the smoke run)."""
    if browser() is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium)")
    page = rendered(tmp_path)
    flags = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    cells = Cells()
    cells.feed(dom)
    assert "SP-1 [neox]" in [c.strip() for c in cells.cells]  # the claims table, rendered
    assert_opens_on_its_title(page, tmp_path, "Tier")
