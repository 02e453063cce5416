"""Turning an LLM reply into a child's source: pure functions, no I/O.

A reply is either a whole module in a fenced python block, or SEARCH/REPLACE blocks against the parent::

    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

A repair asks for blocks (a targeted patch keeps what already works); a rewrite asks for a module. Both are
accepted from either prompt. Whatever cannot be read raises ``ReplyError`` (``PatchError`` for a block that does
not apply) with a message the campaign records as the reason of an ``invalid`` child.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass


class ReplyError(ValueError):
    """The reply holds no usable module or patch. The message says what was wrong."""


class PatchError(ReplyError):
    """A SEARCH/REPLACE block does not apply to the parent source. The message names the block."""


@dataclass(frozen=True)
class SearchReplace:
    search: str
    replace: str
    index: int = 1  # 1-based position in the reply, for error messages


@dataclass(frozen=True)
class Reply:
    """``source`` (a whole module) or ``patches`` (blocks for the parent); exactly one is set."""

    source: str | None = None
    patches: tuple[SearchReplace, ...] = ()

    @property
    def kind(self) -> str:
        return "patches" if self.patches else "module"

    def resolve(self, parent_source: str) -> str:
        """The child's source: the module itself, or the parent with the blocks applied."""
        if self.patches:
            return apply_patches(parent_source, self.patches)
        assert self.source is not None
        return self.source


# -- parsing ---------------------------------------------------------------------------------------------------
_SEARCH = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH\b.*$")
_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_REPLACE = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE\b.*$")
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$")
_DEFINES_MODEL = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)


def parse_search_replace(text: str) -> tuple[SearchReplace, ...]:
    """All SEARCH/REPLACE blocks of a text, in order. Raises ``ReplyError`` on a block left unterminated."""
    lines = text.splitlines(keepends=True)
    blocks: list[SearchReplace] = []
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        index = len(blocks) + 1
        start = i
        i += 1
        search: list[str] = []
        while i < len(lines) and not _DIVIDER.match(lines[i]):
            if _SEARCH.match(lines[i]) or _REPLACE.match(lines[i]):
                raise ReplyError(f"SEARCH/REPLACE block {index} (line {start + 1}) has no ======= divider")
            search.append(lines[i])
            i += 1
        if i >= len(lines):
            raise ReplyError(f"SEARCH/REPLACE block {index} (line {start + 1}) has no ======= divider")
        i += 1
        replace: list[str] = []
        while i < len(lines) and not _REPLACE.match(lines[i]):
            if _SEARCH.match(lines[i]):
                break
            replace.append(lines[i])
            i += 1
        if i >= len(lines) or not _REPLACE.match(lines[i]):
            raise ReplyError(
                f"SEARCH/REPLACE block {index} (line {start + 1}) never ends with >>>>>>> REPLACE (reply truncated?)"
            )
        i += 1
        blocks.append(SearchReplace("".join(search), "".join(replace), index))
    return tuple(blocks)


def code_blocks(text: str) -> tuple[list[tuple[str, str]], bool]:
    """Fenced blocks as (language, body), and whether the text ends inside an open fence (a truncated reply)."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            return blocks, True
        blocks.append((lang, "".join(body)))
        i += 1
    return blocks, False


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def extract_module(text: str) -> str:
    """The module a reply proposes: among fenced blocks defining ``ModelNew``, the last one that parses (a reply
    often quotes the old version before the new), else the longest. Raises ``ReplyError`` when there is none."""
    blocks, truncated = code_blocks(text)
    python = [body for lang, body in blocks if lang in ("", "python", "py", "python3")]
    defining = [body for body in python if _DEFINES_MODEL.search(body)]
    if not defining:
        if truncated:
            raise ReplyError("reply ends inside an unclosed code block (truncated? raise max_tokens)")
        if not blocks and _DEFINES_MODEL.search(text) and _parses(text):
            return text if text.endswith("\n") else text + "\n"  # a bare module, no fences
        if python:
            raise ReplyError(f"reply has {len(python)} python block(s) but none defines class ModelNew")
        raise ReplyError("reply has no python code block and no SEARCH/REPLACE block")
    parsing = [body for body in defining if _parses(body)]
    return parsing[-1] if parsing else max(defining, key=len)


def parse_reply(text: str) -> Reply:
    """SEARCH/REPLACE blocks if the reply has any, else a whole module. Raises ``ReplyError`` with the reason."""
    if not text or not text.strip():
        raise ReplyError("empty reply")
    patches = parse_search_replace(text)
    if patches:
        return Reply(patches=patches)
    return Reply(source=extract_module(text))


# -- applying --------------------------------------------------------------------------------------------------
def _strip_fence_lines(text: str) -> str:
    """A SEARCH/REPLACE body sometimes carries the fence the model put around the whole block."""
    lines = text.splitlines(keepends=True)
    while lines and _FENCE_OPEN.match(lines[0]):
        lines.pop(0)
    while lines and re.match(r"^[ \t]*(`{3,}|~{3,})[ \t]*$", lines[-1]):
        lines.pop()
    return "".join(lines)


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _line_match(source: str, search: str, replace: str) -> str | None:
    """Find ``search`` line by line ignoring trailing whitespace, blank lines at its edges, and a uniform shift
    of indentation; re-indent ``replace`` by the same shift. None when not found exactly once."""
    src = source.splitlines(keepends=True)
    want = _trim_blank(search.splitlines())
    if not want:
        return None
    norm_src = [s.rstrip() for s in src]

    for mode in ("rstrip", "strip"):
        hits = []
        for start in range(len(src) - len(want) + 1):
            window = norm_src[start : start + len(want)]
            if mode == "rstrip":
                ok = window == [w.rstrip() for w in want]
            else:
                ok = [w.strip() for w in window] == [w.strip() for w in want]
            if ok:
                hits.append(start)
        if len(hits) == 1:
            start = hits[0]
            break
        if len(hits) > 1:
            return None
    else:
        return None

    first_want = next(w for w in want if w.strip())
    first_src = next(s for s in src[start : start + len(want)] if s.strip())
    src_indent, want_indent = _indent(first_src), _indent(first_want)
    new_lines = []
    for line in replace.splitlines():
        if line.strip() and mode == "strip":
            if line.startswith(want_indent):
                line = src_indent + line[len(want_indent) :]
            else:
                line = src_indent + line.lstrip(" \t")
        new_lines.append(line + "\n")
    new_lines = _trim_blank(new_lines) if not replace.strip() else new_lines
    end = start + len(want)
    tail_newline = src[end - 1].endswith("\n") if end - 1 < len(src) else True
    if new_lines and not tail_newline:
        new_lines[-1] = new_lines[-1].rstrip("\n")
    return "".join(src[:start] + new_lines + src[end:])


def apply_patches(source: str, patches: Sequence[SearchReplace]) -> str:
    """Apply blocks in order, each to the result of the previous one: an exact match of the SEARCH text first,
    then a whitespace-tolerant line match. A block whose SEARCH text is not found (or is ambiguous) raises
    ``PatchError`` naming the block."""
    total = len(patches)
    for block in patches:
        search = _strip_fence_lines(block.search)
        replace = _strip_fence_lines(block.replace)
        label = f"SEARCH/REPLACE block {block.index} of {total}"
        if not search.strip():
            raise PatchError(f"{label} has an empty SEARCH part (quote the lines to replace)")
        count = source.count(search)
        if count == 1:
            source = source.replace(search, replace, 1)
            continue
        patched = _line_match(source, search, replace)
        if patched is not None:
            source = patched
            continue
        first = next((ln.strip() for ln in search.splitlines() if ln.strip()), "")
        if count > 1:
            raise PatchError(
                f"{label}: SEARCH text occurs {count} times in the parent; quote more lines ({first!r})"
            )
        raise PatchError(f"{label}: SEARCH text not found in the parent source (first line {first!r})")
    return source
