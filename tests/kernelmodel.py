"""A scripted model that answers evoforge's prompts the way real models do, with honest Triton kernels.

Give it to ``tests.fakellm.FakeLLMServer`` as ``default`` (or run ``python -m tests.fakellm --kernels``): it reads
which operator is asking (the prompt's first line), the kernel it was sent and the task, and answers with one of
the behaviours below, taken in order from ``script[operator]`` and then from the operator's default:

- ``variant``: a few sentences, then the kernel rewritten in a fenced block (a new launch configuration and a
  revision note: a real, correct kernel of another structure); ``bare``: the same module with no fence and no
  prose; ``slow``: a variant whose body arrives over a second (a slow upstream);
- ``wrong``: a kernel that compiles and runs but computes the wrong function (its store scaled by 0.5, as a
  model that misreads the reference would);
- ``patch``: SEARCH/REPLACE blocks that undo that fault, their whitespace drifted (indented two spaces more, with
  trailing blanks), the way models quote code; it is the repair default;
- ``unchanged``: the kernel sent back as it came (the stage prompt asks for that when a stage does not apply);
- ``truncated``: a reply cut at max_tokens inside its code block (``finish_reason: length``);
- ``refusal``: "I'm sorry, but I can't help with that." and nothing else;
- ``429`` / ``500``: the endpoint's failure (the client retries it).

By default a stage rewrite is ``variant`` for the stages an elementwise kernel has room for (memory access,
autotuning) and ``unchanged`` for the rest, a generation is ``wrong`` first (so the debug step has work), an
optimization is ``variant``. The kernels it starts a generation from are the shipped templates of the tasks it
knows (ReLU, Sigmoid, Tanh, Swish, GELU: KernelBench level 1, problems 19, 21, 22, 25, 26); for another task it
refuses. ``calls`` counts the requests per operator.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evoforge import knowledge

TEMPLATES = {"19_ReLU": "elementwise_relu", "21_Sigmoid": "elementwise_sigmoid", "22_Tanh": "elementwise_tanh",
             "25_Swish": "elementwise_swish", "26_GELU_": "elementwise_gelu"}
APPLIES = ("memory_access", "autotuning")  # stages that leave room in an elementwise kernel
DEFAULTS = {"generate": "wrong", "repair": "patch", "optimize": "variant", "crossover": "variant",
            "analyze": "variant"}
WRONG = " * 0.5"
_HEADERS = (("write a first kernel", "generate"), ("optimization stage", "stage"), ("repair a failing", "repair"),
            ("make a correct kernel faster", "optimize"), ("combine two correct", "crossover"),
            ("which optimization stages", "analyze"))
_FENCED = re.compile(r"```python\n(.*?)```", re.DOTALL)
_STORE = re.compile(r"^(?P<indent>[ \t]*)tl\.store\((?P<ptr>[^,]+),\s*(?P<value>.+?),\s*mask=(?P<mask>\w+)\)\s*$",
                    re.MULTILINE)


def operator_of(prompt: str) -> str:
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return next((op for marker, op in _HEADERS if marker in first), "unknown")


def kernel_in(prompt: str, header: str) -> str | None:
    """The python block that follows ``## header`` in a prompt."""
    at = prompt.find(f"## {header}")
    if at < 0:
        return None
    found = _FENCED.search(prompt, at)
    return found.group(1) if found else None


def template_for(prompt: str) -> str | None:
    first = prompt.strip().splitlines()[0]
    for key, template in TEMPLATES.items():
        if key in first:
            return knowledge.template_source(template)
    return None


def make_wrong(source: str) -> str:
    """Scale the stored value: compiles, runs, and is wrong everywhere the output is not zero."""
    m = _STORE.search(source)
    if m is None or WRONG in m.group(0):
        return source + "\n# (no store to get wrong)\n"
    line = f"{m['indent']}tl.store({m['ptr']}, ({m['value']}){WRONG}, mask={m['mask']})"
    return source[:m.start()] + line + source[m.end():]


def patch_for(source: str) -> str | None:
    """SEARCH/REPLACE blocks undoing ``make_wrong``, with the whitespace a model's quoting drifts to."""
    for m in _STORE.finditer(source):
        if WRONG not in m["value"] and not m.group(0).rstrip().endswith(f"{WRONG}, mask={m['mask']})"):
            continue
        wrong = m.group(0).rstrip()
        value = m["value"]
        if value.startswith("(") and value.endswith(f"){WRONG}"):
            value = value[1:-len(f"){WRONG}")]
        fixed = f"{m['indent']}tl.store({m['ptr']}, {value}, mask={m['mask']})"
        return (f"The stored value is scaled by 0.5, which the reference never does; store it as computed.\n\n"
                f"<<<<<<< SEARCH\n  {wrong}   \n=======\n  {fixed}\n>>>>>>> REPLACE\n")
    return None


def make_variant(source: str, revision: int, why: str) -> str:
    """Another launch configuration (the next value of the space for BLOCK, num_warps widened) and a note."""
    space, params = knowledge_space(source)
    out = source
    blocks = [b for b in space.get("BLOCK", []) if isinstance(b, int)]
    if blocks and "BLOCK" in params:
        choice = sorted(blocks)[-1 - revision % len(blocks)]
        out = re.sub(r'(PARAMS\s*=\s*\{[^}]*"BLOCK":\s*)\d+', rf"\g<1>{choice}", out, count=1)
    return f"# revision {revision}: {why}\n{out}"


def knowledge_space(source: str) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    from evoforge.core import declared_space

    return declared_space(source)


class KernelModel:
    """A callable step for ``FakeLLMServer``: ``model(messages) -> reply text or step dict``."""

    def __init__(self, script: Mapping[str, Sequence[str]] | None = None, *,
                 stage_default: Mapping[str, str] | None = None) -> None:
        self.script = {op: list(steps) for op, steps in (script or {}).items()}
        self.stage_default = dict(stage_default or {})
        self.calls: Counter[str] = Counter()
        self.revision = 0
        self._lock = threading.Lock()

    def _behaviour(self, operator: str, stage: str) -> str:
        with self._lock:
            queue = self.script.get(f"stage:{stage}") or self.script.get(operator)
            if queue:
                return queue.pop(0)
        if operator == "stage":
            return self.stage_default.get(stage, "variant" if stage in APPLIES else "unchanged")
        return DEFAULTS.get(operator, "refusal")

    def __call__(self, messages: list[dict[str, Any]]) -> str | dict[str, Any]:
        prompt = str(messages[-1].get("content", "")) if messages else ""
        operator = operator_of(prompt)
        stage = ""
        if operator == "stage":
            m = re.search(r'optimization stage "(\w+)"', prompt)
            stage = m.group(1) if m else ""
        with self._lock:
            self.calls[operator] += 1
            self.revision += 1
            revision = self.revision
        behaviour = self._behaviour(operator, stage)
        if behaviour in ("429", "500"):
            return {"status": int(behaviour), "retry_after": 0}
        if behaviour == "refusal":
            return "I'm sorry, but I can't help with that."
        if operator == "analyze":
            return "memory_access\nautotuning\n"
        if operator == "generate":
            kernel = template_for(prompt)
        elif operator == "repair":
            kernel = kernel_in(prompt, "Failing kernel")
        elif operator == "crossover":
            kernel = kernel_in(prompt, "Kernel B")
        else:
            kernel = kernel_in(prompt, "Current kernel")
        if kernel is None:
            return "I'm sorry, but I can't write a kernel for this task."
        if behaviour == "patch":
            patch = patch_for(kernel)
            return patch if patch is not None else f"The kernel looks right to me.\n\n```python\n{kernel}```\n"
        if behaviour == "unchanged":
            what = f'The "{stage}" stage does not apply here' if stage else "Nothing to change"
            return f"{what}; the kernel is returned unchanged.\n\n```python\n{kernel}```\n"
        why = f"{stage or operator} rewrite"
        if behaviour == "wrong":
            source = make_wrong(make_variant(kernel, revision, why))
            return f"Here is the kernel.\n\n```python\n{source}```\n"
        source = make_variant(kernel, revision, why)
        if behaviour == "truncated":
            return {"reply": f"Here is the rewritten kernel.\n\n```python\n{source[: len(source) // 2]}",
                    "finish_reason": "length"}
        if behaviour == "bare":
            return source
        reply = (f"I changed the launch configuration for the {stage or operator} step.\n\n```python\n{source}```\n"
                 "This keeps every tail masked and reads the tuned values from PARAMS.")
        if behaviour == "slow":
            return {"reply": reply, "dribble_s": 1.0}
        return reply
