"""Campaign progress: a live bar on a terminal, a line every few evaluations in a log file."""

from __future__ import annotations

import logging
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

log = logging.getLogger("evoforge.campaign")


class CampaignProgress:
    def __init__(self, campaign: Any, *, enabled: bool = True, console: Console | None = None) -> None:
        self.campaign = campaign
        self.console = console or Console(stderr=True)
        if not self.console.is_terminal:
            self.console = Console(stderr=True, width=200)
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self._progress: Progress | None = None
        self._task_id: Any = None
        self._last_line = 0.0

    def _total(self) -> int:
        return self.campaign.config.budget_evals * len(self.campaign.tasks)

    def _done(self) -> int:
        return sum(s.evaluations for s in self.campaign.tasks.values())

    def _describe(self) -> str:
        parts = []
        for name, state in self.campaign.tasks.items():
            best = state.best()
            short = name.split("/")[-1][:24]
            parts.append(f"{short}: {best[1].speedup:.2f}x" if best else f"{short}: -")
        failures = sum(v for s in self.campaign.tasks.values() for k, v in s.statuses.items() if k != "ok")
        return " | ".join(parts) + f" | failures {failures}"

    def __enter__(self) -> CampaignProgress:
        if self.live:
            self._progress = Progress(TextColumn("[bold]evaluations"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.description}", markup=False),
                                      console=self.console, transient=False)
            self._progress.start()
            self._task_id = self._progress.add_task(self._describe(), total=self._total(), completed=self._done())
        return self

    def update(self) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(self._task_id, total=self._total(), completed=self._done(),
                                  description=self._describe())
        elif time.monotonic() - self._last_line > 10 or self._done() == self._total():
            self._last_line = time.monotonic()  # a log file gets one line per 10 s, not a flood
            self.console.print(f"[{self._done()}/{self._total()}] {self._describe()}", markup=False, highlight=False)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.update(self._task_id, completed=self._done(), description=self._describe())
            self._progress.stop()
