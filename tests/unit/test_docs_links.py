"""The README and docs/*.md link to each other: every relative link names a file that exists, and every `#anchor`
names a heading of its target as GitHub slugs it. The README stays a front page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 260

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = ("http://", "https://", "mailto:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their 1-based numbers."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
        else:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, all but letters, digits, spaces, hyphens and
    underscores dropped, spaces made hyphens."""
    text = LINK.sub(lambda link: link.group(1), heading)
    text = INLINE_CODE.sub(lambda code: code.group(2), text)
    text = text.strip().lower()
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text()):
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The relative Markdown links of a document (outside code), with their line numbers."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(path.read_text()):
        for link in LINK.finditer(INLINE_CODE.sub("", line)):
            target = link.group(2)
            if not target.lower().startswith(EXTERNAL):
                found.append((number, target))
    return found


def per_document() -> list[object]:
    return [pytest.param(path, id=path.relative_to(ROOT).as_posix()) for path in DOCUMENTS]


@pytest.mark.parametrize("document", per_document())
def test_every_relative_link_in_a_document_resolves(document: Path) -> None:
    broken = [
        f"{document.name}:{number}: {target}"
        for number, target in links(document)
        if target.split("#", 1)[0] and not (document.parent / target.split("#", 1)[0]).exists()
    ]
    assert broken == []


@pytest.mark.parametrize("document", per_document())
def test_every_anchor_in_a_document_names_a_heading_of_its_target(document: Path) -> None:
    broken: list[str] = []
    for number, target in links(document):
        if "#" not in target:
            continue
        path, anchor = target.split("#", 1)
        file = (document.parent / path) if path else document
        if file.suffix != ".md" or not file.is_file():
            continue
        if anchor not in anchors(file):
            broken.append(f"{document.name}:{number}: {target}")
    assert broken == []


def test_the_readme_is_a_front_page_of_at_most_260_lines() -> None:
    assert len(README.read_text().splitlines()) <= README_MAX_LINES


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        pytest.param("## HTTP (`main.compact`)", "http-maincompact", id="code"),
        pytest.param("## Try it (no cloud account needed)", "try-it-no-cloud-account-needed", id="punctuation"),
        pytest.param("### Steering: `pod_deletion_cost`", "steering-pod_deletion_cost", id="mixed"),
        pytest.param("## See [the guide](deploy.md)", "see-the-guide", id="link"),
    ],
)
def test_a_heading_slugs_as_on_github(heading: str, anchor: str) -> None:
    match = HEADING.match(heading)
    assert match is not None
    assert slug(match.group(2)) == anchor
