"""What is decided before any process starts: the static check and the target's hard rules.

The static check runs once per child. ``precheck`` stamps a child that passes it with its verdict, in
``candidate.meta["static_check"]``, and every later stage reads the stamp (``static_verdict``) instead of
checking again: the evaluator in the Ray actor, and the chain. The stamp names the source (its hash) and the
language it was made for, so a candidate whose source was changed after the stamp is checked afresh; a child that
fails never travels further (its failure is its result).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evoforge.judge.static import static_check

from evoforge.core import Candidate, EvalResult, EvalStatus

STATIC_CHECK = "static_check"  # the meta key of the travelling verdict


def static_stamp(candidate: Candidate) -> dict[str, Any]:
    """The verdict a candidate that passed the static check carries: ``{"passed", "source", "language"}``."""
    return {"passed": True, "source": candidate.structure_id, "language": candidate.language}


def static_verdict(candidate: Candidate) -> EvalResult | None:
    """The static check's failure, or None when the candidate may go on: read from the candidate's stamp when it
    carries one for its own source and language, else checked now."""
    if candidate.meta.get(STATIC_CHECK) == static_stamp(candidate):
        return None
    return static_check(candidate.source, language=candidate.language)


def knowledge_violations(candidate: Candidate, arch: str, triton_version: str | None = None) -> EvalResult | None:
    """A hard-rule violation of the target hardware is ``invalid`` before anything compiles."""
    from evoforge import knowledge

    violations = [v for v in knowledge.validate(candidate, arch, triton_version=triton_version)
                  if v.severity == "hard"]
    if not violations:
        return None
    lines = [f"{v.rule}" + (f" (line {v.line})" if v.line else "") + f": {v.message}" for v in violations]
    return EvalResult.failure(EvalStatus.INVALID, "breaks hard rule(s) of " + arch + ":\n" + "\n".join(lines),
                              arch=arch, details={"rules": [v.rule for v in violations]})


def precheck(candidate: Candidate, *, backend: str, arch: str,
             knowledge: bool = True) -> tuple[Candidate, EvalResult | None]:
    """Static checks and the target's hard rules: what needs no process.

    Returns the candidate, stamped with its static verdict when it passed, and the failure that ends it here
    (None when it may run).
    """
    failure = static_verdict(candidate)
    if failure is None:
        if candidate.meta.get(STATIC_CHECK) != static_stamp(candidate):
            candidate = replace(candidate, meta={**candidate.meta, STATIC_CHECK: static_stamp(candidate)})
        if knowledge:
            failure = knowledge_violations(candidate, arch)
    return candidate, (replace(failure, backend=backend, arch=arch) if failure is not None else None)
