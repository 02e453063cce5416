"""An `evoforge run` whose LLM is a real OpenAI-compatible server on loopback, scripted.

The first rewrite comes back broken; the repair operator patches it with a SEARCH/REPLACE block; other
replies are correct variants. The campaign must end normally, produce correct LLM children (the repaired one
included), record their tokens, prompts and replies, and never write the API key anywhere.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

import optuna
import pytest

from tests.conftest import FIXTURES, kernelbench_dir, run_cli
from tests.fakellm import FakeLLMServer

GOOD = (FIXTURES / "relu" / "correct.py").read_text()
BROKEN_LINE = "tl.store(y_ptr + offs, tl.maximum(x, 0.0) * scale_missing, mask=mask)"
BROKEN = GOOD.replace("tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)", BROKEN_LINE)


HUNTER = (FIXTURES / "containment" / "key_hunter.py").read_text()


def scripted_reply(state: dict) -> object:
    def reply(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        state["calls"] += 1
        if state["calls"] == 2 and state.get("needle_hex"):  # a child that hunts the key through /proc
            return "```python\n" + HUNTER.replace('"NEEDLE_HEX": ""', f'"NEEDLE_HEX": "{state["needle_hex"]}"') + "```\n"
        if "repair a failing kernel" in prompt and "scale_missing" in prompt:
            state["repairs"] += 1
            return ("The store multiplies by an undefined name; drop it.\n\n<<<<<<< SEARCH\n"
                    f"    {BROKEN_LINE}\n=======\n"
                    "    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)\n>>>>>>> REPLACE\n")
        if state["calls"] == 1:
            return f"Here is a faster kernel.\n\n```python\n{BROKEN}```\n"
        return f"A variant.\n\n```python\n{GOOD}\n# variant {state['calls']}\n```\n"

    return reply


@pytest.mark.slow
def test_llm_campaign_repairs_and_records_without_leaking_the_key(tmp_path):
    """Uncontained (EVOFORGE_CONTAINMENT=none, as on a machine without bubblewrap) and with a task that lets
    candidates read /proc, one LLM child walks every /proc/<pid>/environ and /proc/<pid>/mem it can open: the key is
    in none (the driver that holds it is undumpable, Ray and the judges start without it)."""
    key = "sk-test-" + secrets.token_hex(16)
    state = {"calls": 0, "repairs": 0, "needle_hex": key.encode().hex()}
    out = tmp_path / "run"
    task = tmp_path / "level1" / "19_ReLU.py"  # the ReLU task, its candidates allowed to read other processes
    task.parent.mkdir()
    task.write_text((kernelbench_dir() / "level1" / "19_ReLU.py").read_text() + '\nEVOFORGE_ALLOW = ["introspection"]\n')
    with FakeLLMServer(models=("fake-model",), default=scripted_reply(state)) as server:
        # Every third request fails first (429, then 500): the campaign must not notice.
        server.push({"status": 429}, scripted_reply(state), scripted_reply(state), {"status": 500})
        proc = run_cli("run", "--task", str(task), "--seed-kernel", str(FIXTURES / "relu" / "correct.py"),
                       "--set", "batch_size=4", "--set", "dim=1000", "--backend", "interpreter",
                       "--budget-evals", "10", "--out", str(out), "--name", "llm", "--workers", "1",
                       "--operators", "llm-stage,llm-repair,llm-optimize", "--llm-base-url", server.url,
                       "--llm-model", "fake-model", "--llm-api-key-env", "EVOFORGE_E2E_KEY", "--json",
                       env={"EVOFORGE_E2E_KEY": key, "EVOFORGE_CONTAINMENT": "none"}, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.chat_requests and all(
            r.headers.get("authorization", r.headers.get("Authorization", "")) == f"Bearer {key}"
            for r in server.chat_requests)
    study = optuna.load_study(study_name="llm/level1/19_ReLU", storage=f"sqlite:///{out}/optuna.db")
    trials = study.trials
    assert len(trials) == 10
    llm = [t for t in trials if "llm" in t.user_attrs["operator"]]
    assert llm, "no LLM children"
    ok_llm = [t for t in llm if t.user_attrs["status"] == "ok"]
    assert ok_llm, [t.user_attrs["message"][:200] for t in llm]
    for t in llm:
        if t.user_attrs.get("prompt_tokens") is not None:
            assert t.user_attrs["prompt_tokens"] > 0 and t.user_attrs["model"] == "fake-model"
    assert all("prompt_tokens" in t.user_attrs for t in ok_llm)
    if state["repairs"]:
        repaired = [t for t in trials if t.user_attrs["operator"] == "llm-repair" and t.user_attrs["status"] == "ok"]
        assert repaired, "the repair came back but its child did not pass"
    broken = [t for t in llm if t.user_attrs["status"] != "ok" and "scale_missing" in t.user_attrs["message"]]
    assert broken, "the broken rewrite should have been recorded with its error"
    # The prompt and the reply are artifacts beside the source.
    from optuna.artifacts import get_all_artifact_meta

    names = {m.filename for t in ok_llm for m in get_all_artifact_meta(t, storage=study._storage)}
    assert {"source.py", "prompt.md", "reply.md"} <= names
    # The key appears nowhere: not in the run directory, its database, its logs or the output.
    needle = key.encode()
    for path in Path(out).rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), f"API key found in {path}"
    assert key not in proc.stdout and key not in proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["tasks"]["level1/19_ReLU"]["tokens"] > 0
    assert os.environ.get("EVOFORGE_E2E_KEY") is None
    hunts = [t.user_attrs["message"] for t in trials if "HUNT{" in t.user_attrs.get("message", "")]
    assert hunts, "the hunting child was not evaluated"
    found = re.search(r"HUNT(\{.*?\})TNUH", hunts[0])
    assert found, hunts[0][:3000]
    hunt = json.loads(found.group(1))
    # It did look: run by a user, it reads that user's other processes (Ray's, pytest's); run by root, its process
    # holds no capability and every process that keeps root's refuses it (the machines CI runs on differ).
    assert hunt["environ_read"] + hunt["environ_refused"] > 3 and hunt["mem_opened"] + hunt["mem_refused"] > 3, hunt
    if hunt["mem_opened"] > 3:
        assert hunt["mem_bytes"] > 1 << 20, hunt
    assert hunt["environ_hits"] == [] and hunt["mem_hits"] == [], hunt
    assert hunt["driver_refused"], hunt  # the campaign's own process, which holds the key, could not be opened
