"""The ways a campaign's task starts, one module each (``evoforge.task_start.TaskStarts`` tries them in order):

- ``landscape``: a recorded landscape, answered on ``--backend replay`` (the task is the file);
- ``files``: a seed kernel from a file, the user's (``--seed-kernel``) or the shipped template that serves the task,
  its launch constants lifted into a SPACE where it declares none;
- ``generate``: the reference itself, for an LLM operator to write the first kernel from (``llm-generate``);
- ``inductor``: torch.compile's Triton, captured in processes of their own side by side, with its variants (other
  Inductor configurations, the ``triton-conv`` build) evaluated after it;
- ``knowledge``: configs the knowledge base's shape rules start beside any seed.

Each way that gives a seed answers with a ``Candidate`` (``Start``: the task's first candidate and the ones evaluated
right after it), or says in one ``UsageError`` line why the task cannot start that way."""
