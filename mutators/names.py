"""The names of the mutation operators: one spelling each, imported wherever a name is written.

A name is the operator's registry key, the ``operator`` its children carry, the arm the bandit credits, the name a
config gives and the ``operator`` of its trial in the record (stored studies read these strings back: never
change one). This module imports nothing, so the operators (``mutators/rules.py``, ``mutators/llm_ops.py``), the
registry that builds them (``mutators/registry.py``), the strategies and the campaign all read the names from
here without an import circle. tests/mutators/test_operator_names.py holds the registry to ``OPERATORS`` and the
code to these constants.
"""

from __future__ import annotations

# -- moves a strategy makes itself (no mutator; the registry reserves the names) ------------------------------------
PARAMS = "params"  # new values for the parent's SPACE (an Optuna sampler, a step on the grid)
CROSSOVER = "crossover"  # the values of two parents of one structure mixed (the evolution strategy)
STRATEGY_MOVES = (PARAMS, CROSSOVER)

# -- rule operators (mutators/rules.py) ----------------------------------------------------------------------------
RULE_RETUNE = "rule:retune"
RULE_REDUCTION_FORM = "rule:reduction-form"
RULE_PERSISTENT = "rule:persistent"
RULE_GROUPED_ORDERING = "rule:grouped-ordering"
RULE_INPUT_PRECISION = "rule:input-precision"
RULE_OPERATORS = (RULE_RETUNE, RULE_REDUCTION_FORM, RULE_GROUPED_ORDERING, RULE_INPUT_PRECISION, RULE_PERSISTENT)

# -- LLM operators (mutators/llm_ops.py) ---------------------------------------------------------------------------
LLM_STAGE = "llm-stage"
LLM_REPAIR = "llm-repair"
LLM_OPTIMIZE = "llm-optimize"
LLM_CROSSOVER = "llm-crossover"
LLM_GENERATE = "llm-generate"
LLM_OPERATORS = (LLM_STAGE, LLM_REPAIR, LLM_OPTIMIZE, LLM_CROSSOVER, LLM_GENERATE)

#: every registered operator (``mutators.registry.operator_names()`` is exactly these)
OPERATORS = (*RULE_OPERATORS, *LLM_OPERATORS)

# -- families: a config names every operator of one at once ------------------------------------------------------
RULE = "rule"
LLM = "llm"
FAMILIES = (RULE, LLM)

# -- what an LLM operator's child carries as its ``stage`` where it follows none of the nine stages
# (knowledge/stages.yaml): a step of the LLM loop, never a stage's name -------------------------------------------
REPAIR_STEP = "repair"
OPTIMIZE_STEP = "optimize"
CROSSOVER_STEP = "crossover"
GENERATE_STEP = "generate"
LLM_STEPS = (REPAIR_STEP, OPTIMIZE_STEP, CROSSOVER_STEP, GENERATE_STEP)
