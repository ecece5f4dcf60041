"""The README stays a newcomer's page (under 250 lines; listings and tables of figures live in
docs/), and every relative link in it and in docs/README.md leads to a file that exists."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_is_under_250_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move listings to docs/"


def test_every_relative_link_of_the_readme_and_the_docs_index_exists():
    for page in (REPO / "README.md", REPO / "docs" / "README.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links {target}, which is missing"
