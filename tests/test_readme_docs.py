"""README is the first hour's guide and docs/ holds the reference: every relative link between them
resolves (files and headings), README links every page and every page links back, and every
section that shows shell commands is read by a test that runs them verbatim."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.readme import README, REPO, documents, sections

# README's budget: what a user needs in the first hour. Reference belongs in a page of docs/.
README_MAX_LINES = 320

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE_SPAN = re.compile(r"``.+?``|`[^`]*`", re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def prose(path: Path) -> str:
    """The file without code blocks or code spans: a `[x](y)` or `# x` in code is no link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", path.read_text()))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of the file's headings; a repeated heading's are suffixed -1, -2..."""
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text())):
        anchor = slug(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        if count:
            seen[f"{anchor}-{count}"] = 1
    return set(seen)


def relative_links(path: Path) -> list[str]:
    return [target for target in _LINK.findall(prose(path))
            if not re.match(r"[a-z]+:", target)]  # http:, https:, mailto: are not checked here


def test_every_relative_link_in_readme_and_docs_resolves():
    broken = []
    for document in documents():
        for target in relative_links(document):
            file, _, anchor = target.partition("#")
            resolved = (document.parent / file).resolve() if file else document
            where = f"{document.relative_to(REPO)}: ({target})"
            if not resolved.exists():
                broken.append(f"{where}: no file {resolved}")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where}: no heading with anchor #{anchor} in {resolved.name}")
    assert not broken, "\n".join(broken)


def test_readme_links_every_page_of_docs_and_every_page_links_back():
    linked = {(README.parent / target.partition("#")[0]).resolve()
              for target in relative_links(README)}
    pages = documents()[1:]
    assert pages, "docs/ has no pages"
    for page in pages:
        assert page.resolve() in linked, f"README does not link {page.relative_to(REPO)}"
        back = {target.partition("#")[0] for target in relative_links(page)}
        assert "../README.md" in back, f"{page.relative_to(REPO)} does not link back to README"


def test_readme_is_a_first_hour_guide_with_its_contents_at_the_top():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README has {len(lines)} lines (at most {README_MAX_LINES}): move reference into docs/")
    head = "\n".join(lines[:40])
    for title in [found.heading for found in sections("README.md")]:
        assert f"(#{slug(title)})" in head, f"the contents atop README do not link '## {title}'"


def titles_read_by_tests() -> set[str]:
    """The section titles that test files pass to `shell_blocks(...)` or `code_blocks(..., "sh")`,
    as a literal or through a module-level name bound to one."""
    titles: set[str] = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        names = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
        for call in ast.walk(tree):
            name = getattr(getattr(call, "func", None), "id", None)
            if name not in ("shell_blocks", "code_blocks") or not call.args:
                continue
            language = call.args[1] if len(call.args) > 1 else None
            if name == "code_blocks" and getattr(language, "value", None) != "sh":
                continue  # a python or text block: not a command
            first = call.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                titles.add(first.value)
            elif isinstance(first, ast.Name) and first.id in names:
                titles.add(names[first.id])
    return titles


def test_every_section_with_shell_commands_is_run_by_a_test():
    titles = titles_read_by_tests()
    unread = [f"{found.document.relative_to(REPO)}: '## {found.heading}'" for found in sections()
              if "```sh\n" in found.text
              and not any(found.heading.startswith(title) for title in titles)]
    assert not unread, ("sections whose commands no test runs verbatim (read them with "
                        "tests.readme.shell_blocks in a test that runs them): " + ", ".join(unread))
