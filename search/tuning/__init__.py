"""The default strategy's parameter tuner and its parts: ``tuner.StructureTuner`` (the walk over one structure's
SPACE, with its start, escapes and failure models), ``optuna_tuner.OptunaTuner`` (an Optuna sampler asked and told one
config at a time), ``choices`` (what a categorical path costs against another), ``causes`` (which values make a config
fail), ``surrogate`` (the failure model's fit), ``bandit`` (Thompson sampling over proposal sources). The strategies
in ``search/strategies/`` use them; nothing here imports a strategy."""
