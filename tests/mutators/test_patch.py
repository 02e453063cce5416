"""The reply parser and the patcher: what an LLM writes becomes a child's source, or a clear reason why not."""

from __future__ import annotations

import pytest
from evoforge.mutators.patch import (
    PatchError,
    ReplyError,
    SearchReplace,
    apply_patches,
    code_blocks,
    parse_reply,
    parse_search_replace,
)

PARENT = """import torch
import triton
import triton.language as tl

SPACE = {"BLOCK": [256, 512, 1024]}
PARAMS = {"BLOCK": 256}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x + y)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, PARAMS["BLOCK"]),)](x, y, out, n, BLOCK=PARAMS["BLOCK"])
        return out
"""


def fenced(body: str, lang: str = "python") -> str:
    return f"```{lang}\n{body}```"


# -- whole modules ---------------------------------------------------------------------------------------------
def test_module_in_a_fenced_block_is_the_child() -> None:
    reply = parse_reply("Here you go:\n\n" + fenced(PARENT) + "\nThis masks nothing yet.")
    assert reply.kind == "module"
    assert reply.source == PARENT
    assert reply.resolve("ignored") == PARENT


def test_last_block_defining_modelnew_wins_over_quoted_old_version_and_helpers() -> None:
    old = PARENT
    new = PARENT.replace("x + y)", "x + y)  # fused")
    text = (
        "Old:\n"
        + fenced(old)
        + "\nA helper:\n"
        + fenced("def helper():\n    pass\n")
        + "\nNew:\n"
        + fenced(new)
    )
    assert parse_reply(text).source == new


def test_a_block_that_does_not_parse_loses_to_one_that_does() -> None:
    good = PARENT
    broken = "class ModelNew(:\n    pass\n"
    assert parse_reply(fenced(good) + "\n" + fenced(broken)).source == good


def test_plain_fence_and_tilde_fence_are_read() -> None:
    assert parse_reply(fenced(PARENT, lang="")).source == PARENT
    assert parse_reply("~~~python\n" + PARENT + "~~~\n").source == PARENT


def test_unfenced_module_is_accepted() -> None:
    assert parse_reply(PARENT).source == PARENT


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty reply"),
        ("I cannot help with that.", "no python code block"),
        (fenced("def f():\n    return 1\n"), "none defines class ModelNew"),
        ("Sure:\n```python\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n", "truncated"),
        ("<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n", "never ends"),
        ("<<<<<<< SEARCH\nx = 1\n>>>>>>> REPLACE\n", "no ======= divider"),
    ],
)
def test_unusable_replies_raise_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ReplyError, match=reason):
        parse_reply(text)


# -- SEARCH/REPLACE --------------------------------------------------------------------------------------------
MASK_PATCH = """The loads are not masked.

<<<<<<< SEARCH
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x + y)
=======
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
>>>>>>> REPLACE
"""


def test_search_replace_blocks_are_parsed_in_order() -> None:
    text = MASK_PATCH + "\nand\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    blocks = parse_search_replace(text)
    assert [b.index for b in blocks] == [1, 2]
    assert blocks[1] == SearchReplace("a\n", "b\n", 2)
    assert parse_reply(text).kind == "patches"


def test_exact_patch_changes_only_the_quoted_lines() -> None:
    child = parse_reply(MASK_PATCH).resolve(PARENT)
    assert "mask = offs < n" in child
    assert "tl.store(out_ptr + offs, x + y, mask=mask)" in child
    assert child.replace("    mask = offs < n\n", "").replace(", mask=mask", "") == PARENT


def test_blocks_apply_in_sequence_each_on_the_previous_result() -> None:
    blocks = [
        SearchReplace('PARAMS = {"BLOCK": 256}\n', 'PARAMS = {"BLOCK": 512}\n', 1),
        SearchReplace('PARAMS = {"BLOCK": 512}\n', 'PARAMS = {"BLOCK": 1024}\n', 2),
    ]
    assert 'PARAMS = {"BLOCK": 1024}' in apply_patches(PARENT, blocks)


def test_patch_inside_a_code_fence_is_read() -> None:
    text = "```python\n" + MASK_PATCH.split("\n\n", 1)[1] + "```\n"
    assert "mask = offs < n" in parse_reply(text).resolve(PARENT)


def test_whitespace_tolerant_match_reindents_the_replacement() -> None:
    # the model dropped the function's indentation and added trailing spaces
    block = SearchReplace(
        "x = tl.load(x_ptr + offs)   \ny = tl.load(y_ptr + offs)\n",
        "x = tl.load(x_ptr + offs, mask=offs < n)\ny = tl.load(y_ptr + offs, mask=offs < n)\n",
        1,
    )
    child = apply_patches(PARENT, [block])
    assert (
        "    x = tl.load(x_ptr + offs, mask=offs < n)\n    y = tl.load(y_ptr + offs, mask=offs < n)\n"
        in child
    )
    compile(child, "child", "exec")


def test_trailing_whitespace_and_blank_edges_are_tolerated() -> None:
    block = SearchReplace("\n    pid = tl.program_id(0)  \n\n", "    pid = tl.program_id(axis=0)\n", 1)
    assert "    pid = tl.program_id(axis=0)\n" in apply_patches(PARENT, [block])


def test_block_not_found_names_the_block() -> None:
    blocks = [
        SearchReplace("    pid = tl.program_id(0)\n", "    pid = tl.program_id(0)  # ok\n", 1),
        SearchReplace("    z = tl.load(z_ptr)\n", "    z = 0\n", 2),
    ]
    with pytest.raises(PatchError, match=r"block 2 of 2.*not found.*z = tl.load\(z_ptr\)"):
        apply_patches(PARENT, blocks)


def test_ambiguous_search_is_refused() -> None:
    source = "a = 1\nb = 2\na = 1\n"
    with pytest.raises(PatchError, match="occurs 2 times"):
        apply_patches(source, [SearchReplace("a = 1\n", "a = 3\n", 1)])


def test_empty_search_is_refused() -> None:
    with pytest.raises(PatchError, match="empty SEARCH"):
        apply_patches(PARENT, [SearchReplace("\n", "x = 1\n", 1)])


def test_deleting_lines() -> None:
    child = apply_patches(PARENT, [SearchReplace("    pid = tl.program_id(0)\n", "", 1)])
    assert "program_id" not in child


def test_code_blocks_report_truncation() -> None:
    blocks, truncated = code_blocks("```python\na = 1\n```\n```python\nb = 2\n")
    assert blocks == [("python", "a = 1\n")]
    assert truncated
