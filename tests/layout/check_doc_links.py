#!/usr/bin/env python3
"""Checks the relative links of the Markdown docs: every linked file exists and every #anchor names a
heading of its target (GitHub's slugs). External links (http, https, mailto) are not followed.

Usage: check_doc_links.py [REPO_ROOT]   (default: the repository holding this script)
Prints each broken link as `file:line: what` and exits 1 if there is any.
"""
import pathlib
import re
import sys

LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces as '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(path):
    """(number, line) of a Markdown file, fenced code blocks left out."""
    fenced = False
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path):
    seen = {}
    result = set()
    for _, line in lines_outside_code(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def markdown_files(root):
    files = [root / "README.md"] if (root / "README.md").exists() else []
    files += sorted((root / "docs").rglob("*.md")) if (root / "docs").exists() else []
    return files


def check(root):
    problems = []
    cache = {}
    for path in markdown_files(root):
        relative = path.relative_to(root)
        for number, line in lines_outside_code(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                linked = (path.parent / file_part).resolve() if file_part else path
                if not linked.exists():
                    problems.append(f"{relative}:{number}: {target}: no such file")
                    continue
                if anchor and linked.suffix == ".md":
                    if linked not in cache:
                        cache[linked] = anchors(linked)
                    if anchor not in cache[linked]:
                        problems.append(f"{relative}:{number}: {target}: no heading with anchor "
                                        f"#{anchor} in {linked.relative_to(root)}")
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    problems = check(root.resolve())
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} broken link(s) in the docs")
        return 1
    print(f"doc links: every relative link of {len(markdown_files(root.resolve()))} files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
