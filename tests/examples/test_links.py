"""Every relative link in the README and the docs points at a file that exists, and every
``#anchor`` into a Markdown file names one of its headings."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def links(page: Path) -> list[str]:
    """The targets of the Markdown links and images of ``page``, code blocks left out."""
    return LINK.findall(FENCE.sub("", page.read_text()))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the headings of ``page``."""
    text = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M)}


def test_the_pages_exist():
    for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "LICENSE", "docs/architecture.md",
                 "docs/results.md", "docs/benchmarks.md"):
        assert (ROOT / name).is_file(), name


def resolves(page: Path, target: str) -> bool:
    """Whether the relative link ``target`` of ``page`` names a file that exists (and, into a
    Markdown file, one of its headings); links with a scheme (``https:``) are not checked."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return True
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return False
    return not anchor or file.suffix != ".md" or anchor in anchors(file)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_that_exists(page):
    broken = [target for target in links(page) if not resolves(page, target)]
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_link_check_sees_links_and_refuses_broken_ones():
    readme = ROOT / "README.md"
    assert any(link.startswith("docs/") for link in links(readme))
    assert slug("SAC, TD3, DDPG: logged `metrics`") == "sac-td3-ddpg-logged-metrics"
    assert resolves(readme, "docs/results.md#cartpole-and-bit-flipping-10-seeds") and resolves(readme, "https://example.org/x")
    assert not resolves(readme, "docs/no-such-page.md")
    assert not resolves(readme, "docs/results.md#no-such-heading")
