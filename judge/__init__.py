"""The judge: the verification chain (``chain``) and what it runs in. A candidate is evaluated in an evaluation
process (``sandbox`` starts ``worker``), whose chain holds the task, the reference, the inputs and the comparator
(``compare``, ``floor``), and runs the candidate in a process of its own (``candidate_process`` starts ``runner``,
contained by ``containment``; ``guards`` count its launches and watch its ops; ``arena`` is the memory they share).
``evaluator`` is the caller's handle, ``precheck``/``static`` what is judged from the source alone, ``options`` the
chain's torch-free options. It stands on the device backends (``evoforge.backends``) and drives them."""
