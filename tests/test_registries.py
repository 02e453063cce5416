"""The registries by name: the built-ins load lazily, a plug-in registered with the public decorator is built by
name beside them, and a member imported first (before its registry) still leaves the registry whole. Run in a fresh
interpreter each: a registry is process state that other tests' collection reads."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.test_architecture import REPO


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_plug_in_strategy_is_built_by_name_beside_the_built_ins() -> None:
    out = _run("""
        from evoforge.search.strategies.random_search import RandomSearch  # a member first, its registry after
        from evoforge.search.strategies import BUILTIN, get_strategy, register_strategy, strategy_names

        @register_strategy("mine")
        class Mine(RandomSearch):
            name = "mine"

        assert set(BUILTIN) < set(strategy_names()) and "mine" in strategy_names(), strategy_names()
        print(get_strategy("mine", seed=0).name, get_strategy("random", seed=0).name)
    """)
    assert out.split() == ["mine", "random"]


def test_a_plug_in_backend_is_built_by_name_beside_the_built_ins() -> None:
    out = _run("""
        from evoforge.backends.interpreter import InterpreterBackend  # a member first, its registry after
        from evoforge.backends.registry import backend_names, get_backend, register

        @register("mine")
        class Mine(InterpreterBackend):
            name = "mine"

        assert {"cuda", "interpreter", "replay", "xpu", "mine"} <= set(backend_names()), backend_names()
        print(get_backend("mine").name, get_backend("interpreter").name)
    """)
    assert out.split() == ["mine", "interpreter"]


def test_a_built_in_that_cannot_load_says_why_every_time() -> None:
    """A member whose import fails (a missing dependency) raises that error at each ask, not once and then an
    'unknown strategy' or 'unknown backend' that hides it."""
    out = _run("""
        import sys
        sys.modules["evoforge.search.strategies.stages"] = None  # its import now raises ImportError
        sys.modules["evoforge.backends.xpu"] = None
        from evoforge.search.strategies import get_strategy
        from evoforge.backends.registry import get_backend
        for ask in (lambda: get_strategy("random", seed=0), lambda: get_backend("interpreter")):
            for _ in range(2):
                try:
                    ask()
                except ImportError:
                    print("ImportError")
                except Exception as e:
                    print(type(e).__name__)
    """)
    assert out.split() == ["ImportError"] * 4
