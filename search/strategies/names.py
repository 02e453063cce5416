"""The built-in strategies' names, each written here once: a leaf that imports nothing.

A strategy's module names itself with its constant (``name = DEFAULT``), the registry (``evoforge.search.strategies``)
keys it by the same constant, and the config's and the search benchmark's defaults name theirs through these;
studies and configs store these strings and read them back.
"""

BAYES = "bayes"
CUTEGEN = "cutegen"
DEFAULT = "default"
EVOLUTION = "evolution"
RANDOM = "random"
STAGES = "stages"
BUILTIN = (BAYES, CUTEGEN, DEFAULT, EVOLUTION, RANDOM, STAGES)
