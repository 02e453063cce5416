"""Campaign configuration: a TOML file, overridden by flags, checked before anything starts.

A config holds only plain values (no live objects), so the resolved config is written to the run directory
as it is and ``--resume`` reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoforge.core import UsageError
from evoforge.mutators.llm_client import LLMConfig
from evoforge.mutators.names import PARAMS, RULE
from evoforge.search.strategies import DEFAULT as DEFAULT_STRATEGY

DEFAULT_OPERATORS = [PARAMS, RULE]
# Spellings of earlier versions, still read (with a one-line note) so existing configs keep working.
DEPRECATED_KEYS = {"trials": "correctness_runs"}

log = logging.getLogger("evoforge.config")


@dataclass
class TaskConfig:
    spec: str
    set: dict[str, Any] = field(default_factory=dict)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    seed_kernel: str = ""  # a candidate file; empty: the template that serves this task
    floor_passes: float | None = None
    allow_ops: list[str] = field(default_factory=list)
    language: str = ""  # "triton" or "cute"; empty: the seed's own (core.source_language)
    # A recorded landscape (backends/replay.py) that answers this task's evaluations on --backend replay: the task is
    # the file's kernel, its seed the file's space; ``spec`` may be left out (it is then the file)
    landscape: str = ""


@dataclass
class ReplayConfig:
    """The simulated device of ``--backend replay`` (``[replay]``): how long each evaluation keeps a device busy,
    and, for tasks without a landscape (answered by a seeded cost model), which failures it draws how often."""

    delay_s: float = 0.0
    failures: dict[str, float] = field(default_factory=dict)  # status -> probability (compile_error, incorrect...)
    devices_per_actor: int = 1  # simulated devices one Ray actor process serves at once (--workers of them in all)

    def is_default(self) -> bool:
        return self == ReplayConfig()


@dataclass
class CampaignConfig:
    name: str = "campaign"
    out: str = ""  # run directory; empty: runs/<name>
    backend: str = "auto"
    arch: str = ""  # knowledge-base arch; empty: the device's
    seed: int = 0
    workers: int = 0  # evaluation actors; 0: evaluators_per_device per GPU, or 2 on the interpreter
    evaluators_per_device: int = 2  # actors sharing a GPU: one measures while the others load and compile
    build_workers: int = 0  # CuTe: nvcc builds run ahead on CPU threads; 0: one per core, up to 16
    budget_evals: int = 50  # per task
    budget_minutes: float = 0.0  # the search's wall clock, once every task has its seed (set-up before it); 0: no limit
    strategy: str = DEFAULT_STRATEGY
    strategy_options: dict[str, Any] = field(default_factory=dict)  # keyword options of the strategy
    operators: list[str] = field(default_factory=lambda: list(DEFAULT_OPERATORS))  # names in mutators/registry.py
    storage: str = ""  # Optuna RDB URL; empty: sqlite:///RUN_DIR/optuna.db
    ray_address: str = ""  # empty: start Ray locally
    timeout_s: float = 120.0
    # Runs of the candidate with fresh random inputs, each compared with the reference. Not Optuna's "trial":
    # a trial of the record is one whole evaluation of one candidate.
    correctness_runs: int = 3
    timing_budget_ms: float = 1000.0
    knowledge: bool = True
    # torch.compile's default (static) build of each task's reference timed once, as candidates are, the baseline
    # every result is held to: "auto" (on a device; off on the interpreter, whose times say nothing), "on", "off"
    compile_baseline: str = "auto"
    # the finalists of each task re-timed before its best kernel is named (evoforge/confirm.py): "auto" (on a
    # device; off on the interpreter), "on", "off"
    confirm: str = "auto"
    cache_dir: str = ""  # result cache shared between runs; empty: RUN_DIR/cache
    # KernelBench's folder for L1/23-style tasks (relative to the config file); empty: --kernelbench, else
    # $EVOFORGE_KERNELBENCH, the fetch cache, ../shared/kernelbench beside a checkout (evoforge.task.locate_kernelbench)
    kernelbench: str = ""
    tasks: list[TaskConfig] = field(default_factory=list)
    llm: LLMConfig = field(default_factory=LLMConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)

    def run_dir(self) -> Path:
        return Path(self.out or f"runs/{self.name}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write(self, path: Path) -> None:
        from evoforge.search.durable import atomic_write

        atomic_write(path, json.dumps(self.to_dict(), indent=2, sort_keys=True))


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str, source: str) -> Any:
    """Check a TOML value against a field's type; ints are accepted where floats are expected."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            if option is type(None) and value is None:
                return None
            try:
                return _coerce(value, option, where, source)
            except UsageError:
                continue
        raise UsageError(f"{source}: {where} = {value!r} has the wrong type (expected {tp})")
    if origin is list:
        if not isinstance(value, list):
            raise UsageError(f"{source}: {where} must be a list, got {type(value).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [_coerce(v, item, f"{where}[{i}]", source) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise UsageError(f"{source}: {where} must be a table, got {type(value).__name__}")
        return dict(value)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise UsageError(f"{source}: {where} must be a table")
        return _build(tp, value, where, source)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool):
        raise UsageError(f"{source}: {where} must be a {_type_name(tp)}, got a boolean")
    if not isinstance(value, tp):
        raise UsageError(f"{source}: {where} must be a {_type_name(tp)}, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, table: dict[str, Any], where: str, source: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise UsageError(f"{source}: unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k, source) for k, v in table.items()}
    if cls is TaskConfig and "spec" not in kwargs and kwargs.get("landscape"):
        kwargs["spec"] = kwargs["landscape"]  # a landscape is the task
    if cls is TaskConfig and "spec" not in kwargs:
        raise UsageError(f"{source}: {where} needs spec = \"<task file or L1/23>\"")
    return cls(**kwargs)


def _normalize_task(entry: Any, i: int, source: str) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"spec": entry}
    if not isinstance(entry, dict):
        raise UsageError(f"{source}: tasks[{i}] must be a task spec string or a table")
    entry = dict(entry)
    if isinstance(entry.get("shapes"), str):
        from evoforge.task import parse_shapes

        entry["shapes"] = parse_shapes(entry["shapes"])
    return entry


def _normalize_llm(table: Any, source: str) -> Any:
    """``models`` as ``{name = weight}``; the list form ``[{name = "...", weight = 1.0}]`` reads the same."""
    if not isinstance(table, dict) or not isinstance(table.get("models"), list):
        return table
    models: dict[str, float] = {}
    for i, m in enumerate(table["models"]):
        if not isinstance(m, dict) or "name" not in m:
            raise UsageError(f"{source}: llm.models[{i}] must be a table with a name (and a weight)")
        models[str(m["name"])] = float(m.get("weight", 1.0))
    return {**table, "models": models}


#: The tables of a campaign TOML beside [campaign] (the simulated device's is named after the backend it sets up).
REPLAY = "replay"
SECTIONS = ("tasks", "llm", REPLAY)
# What a resumed campaign may change (the rest is the run's: its name, tasks, operators...).
COMPILE_BASELINE = ("auto", "on", "off")
RESUME_OVERRIDES = ("budget_evals", "budget_minutes", "backend", "storage", "ray_address", "workers", "timeout_s",
                    "evaluators_per_device", "build_workers")


def read_toml(path: str | Path) -> dict[str, Any]:
    """A config file's TOML as a dict; a missing or malformed file is one UsageError line naming it."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"config {path}: file not found")
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"config {path}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise UsageError(f"config {path}: not a text file") from None


def load_config(path: str | None) -> CampaignConfig:
    """Read a campaign TOML. ``[campaign]`` keys, ``[[tasks]]`` and ``[llm]``; every mistake is one line."""
    if not path:
        return CampaignConfig()
    return config_from_dict(read_toml(path), source=f"config {path}", base_dir=Path(path).parent)


def _renamed(table: dict[str, Any], source: str, *, note: bool) -> dict[str, Any]:
    """Keys of earlier versions under their new names; both spellings at once is a mistake."""
    for old, new in DEPRECATED_KEYS.items():
        if old in table:
            if new in table:
                raise UsageError(f"{source}: both {old} and {new} are set; {old} is the old name of {new}: keep one")
            table[new] = table.pop(old)
            if note:
                log.warning("%s: `%s` is now `%s` (the old name still works)", source, old, new)
    return table


def config_from_dict(data: dict[str, Any], *, source: str, base_dir: Path | None = None,
                     note_deprecated: bool = True) -> CampaignConfig:
    """A campaign config from the TOML structure (``{"campaign": {...}, "tasks": [...], "llm": {...}}``)."""
    data = dict(data)
    unknown = sorted(set(data) - {"campaign", *SECTIONS})
    if unknown:
        raise UsageError(f"{source}: unknown section [{unknown[0]}] (known: [campaign], [[tasks]], [llm], [replay])")
    table = _renamed(dict(data.get("campaign", {})), source, note=note_deprecated)
    if any(section in table for section in SECTIONS):
        raise UsageError(f"{source}: put tasks in [[tasks]], LLM settings in [llm] and the simulated device in "
                         "[replay], not under [campaign]")
    table["tasks"] = [_normalize_task(t, i, source) for i, t in enumerate(data.get("tasks", []))]
    table["llm"] = _normalize_llm(data.get("llm", {}), source)
    table[REPLAY] = data.get(REPLAY, {})
    config = _build(CampaignConfig, table, "", source)
    if base_dir is not None:  # paths in a config are relative to the config file, as a user expects
        for task in config.tasks:
            if task.seed_kernel and not Path(task.seed_kernel).is_absolute():
                task.seed_kernel = str((base_dir / task.seed_kernel).resolve())
            if task.landscape and not Path(task.landscape).is_absolute():
                relative = task.spec == task.landscape
                task.landscape = str((base_dir / task.landscape).absolute())
                task.spec = task.landscape if relative else task.spec
            spec_path = base_dir / task.spec
            if spec_path.exists():
                task.spec = str(spec_path.resolve())
        if config.kernelbench and not Path(config.kernelbench).expanduser().is_absolute():
            config.kernelbench = str((base_dir / config.kernelbench).resolve())
    resolve_kernelbench_specs(config, f"kernelbench in {source}")
    validate_config(config, source)
    return config


def resolve_kernelbench_specs(config: CampaignConfig, how: str) -> None:
    """With a ``kernelbench`` key, each L1/23-style task becomes its file there (``--kernelbench`` still outranks
    the key), so the key holds wherever the config goes: ``evoforge run``, the Python API, an ablation, a resume."""
    if not config.kernelbench:
        return
    from evoforge.task import is_kernelbench_spec, locate_kernelbench, resolve_task_path

    source = locate_kernelbench(config.kernelbench, config_how=how)
    for task in config.tasks:
        if is_kernelbench_spec(task.spec):
            task.spec = str(resolve_task_path(task.spec, kernelbench=source))


def validate_config(config: CampaignConfig, source: str) -> None:
    if config.budget_evals < 1:
        raise UsageError(f"{source}: budget_evals must be at least 1")
    if config.budget_minutes < 0:
        raise UsageError(f"{source}: budget_minutes must be >= 0 (0: no time limit)")
    if config.correctness_runs < 1:
        raise UsageError(f"{source}: correctness_runs must be at least 1")
    if config.timeout_s <= 0:
        raise UsageError(f"{source}: timeout_s must be positive")
    if config.build_workers < 0:
        raise UsageError(f"{source}: build_workers must be >= 0 (0: one per CPU core, up to 16)")
    if config.workers < 0:
        raise UsageError(f"{source}: workers must be >= 0 (0: automatic)")
    if config.compile_baseline not in COMPILE_BASELINE:
        where = "--compile-baseline" if source == "flags" else f"{source}: compile_baseline"
        raise UsageError(f"{where} = {config.compile_baseline!r}: choose from {', '.join(COMPILE_BASELINE)}")
    if config.confirm not in COMPILE_BASELINE:
        where = "--confirm" if source == "flags" else f"{source}: confirm"
        raise UsageError(f"{where} = {config.confirm!r}: choose from {', '.join(COMPILE_BASELINE)}")
    if config.evaluators_per_device < 1:
        raise UsageError(f"{source}: evaluators_per_device must be at least 1 (1: a GPU evaluates one candidate "
                         "at a time)")
    from evoforge.core import LANGUAGES

    flags = source == "flags"
    for i, task in enumerate(config.tasks):
        if task.language and task.language not in LANGUAGES:
            where = "--language" if flags else f"{source}: tasks[{i}].language"
            raise UsageError(f"{where} = {task.language!r}: unknown kernel language (choose from "
                             f"{', '.join(LANGUAGES)}, or leave it out to take the seed's)")
    _validate_replay(config, source)
    if not config.name or "/" in config.name:
        raise UsageError(f"{source}: name must be non-empty and contain no '/' (studies are named <name>/<task>)")
    from evoforge.backends.registry import backend_names
    from evoforge.mutators.registry import expand_operators
    from evoforge.search.strategy_spec import check_strategy

    flags = source == "flags"
    if config.backend not in ("auto", *backend_names()):
        where = f"--backend {config.backend}" if flags else f"{source}: backend {config.backend!r}"
        raise UsageError(f"{where}: unknown backend (choose from auto, {', '.join(backend_names())})")
    check_strategy(config.strategy, flag="--strategy" if flags else f"{source}: strategy",
                   options=config.strategy_options)
    expand_operators(config.operators, source="--operators" if flags else f"{source}: operators")


def _validate_replay(config: CampaignConfig, source: str) -> None:
    """Landscapes and a simulated device belong to ``--backend replay``, and it to them: a mix is one line naming
    the flag (or key) and the fix."""
    flags = source == "flags"
    from evoforge.backends.registry import simulates

    landscapes = [t for t in config.tasks if t.landscape]
    if not simulates(config.backend):
        if landscapes:
            where = "--landscape" if flags else f"{source}: tasks[{config.tasks.index(landscapes[0])}].landscape"
            raise UsageError(f"{where} {landscapes[0].landscape}: a landscape answers evaluations only on "
                             f"--backend replay (the backend is {config.backend}); add --backend replay, or drop "
                             "the landscape to run the task's kernels")
        if not config.replay.is_default():
            where = "--replay-delay/--replay-failures/--devices-per-actor" if flags else f"{source}: [replay]"
            raise UsageError(f"{where}: settings of the simulated device of --backend replay (the backend is "
                             f"{config.backend}); add --backend replay, or drop them")
        return
    from evoforge.backends.replay import check_simulation

    check_simulation({"delay_s": config.replay.delay_s, "failures": config.replay.failures},
                     where="--replay-delay/--replay-failures:" if flags else f"{source}: [replay]")
    if config.replay.devices_per_actor < 1:
        where = "--devices-per-actor" if flags else f"{source}: [replay] devices_per_actor"
        raise UsageError(f"{where} = {config.replay.devices_per_actor}: at least 1 simulated device per actor")
    names = [Path(t.landscape).stem for t in landscapes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--landscape: two landscapes make one task {twice[0]!r} (a task is named by its file's "
                         "stem): give each task a file of its own name")


def resolved_config_from_file(path: Path) -> CampaignConfig:
    """The config a run directory was started with (``RUN_DIR/config.json``)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"--resume: cannot read {path} ({e.__class__.__name__}); is this a run directory?") from None
    tasks = data.pop("tasks", [])
    llm = data.pop("llm", {})
    replay = data.pop(REPLAY, {})
    return config_from_dict({"campaign": data, "tasks": tasks, "llm": llm, REPLAY: replay}, source=str(path),
                            note_deprecated=False)
