"""Rows and statements a SQLite record hands back, counted at the DB-API cursor: what reading a record costs,
measured without a clock (``RecordStorage(url, engine_kwargs={"connect_args": {"factory": CountingConnection}})``)."""

from __future__ import annotations

import sqlite3


class Rows:
    """Counts since the last ``reset``."""

    fetched = 0
    statements = 0

    @classmethod
    def reset(cls) -> None:
        cls.fetched = cls.statements = 0


class CountingCursor(sqlite3.Cursor):
    def execute(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        Rows.statements += 1
        return super().execute(*args, **kwargs)

    def fetchone(self):  # type: ignore[no-untyped-def]
        row = super().fetchone()
        Rows.fetched += row is not None
        return row

    def fetchmany(self, *args):  # type: ignore[no-untyped-def]
        rows = super().fetchmany(*args)
        Rows.fetched += len(rows)
        return rows

    def fetchall(self):  # type: ignore[no-untyped-def]
        rows = super().fetchall()
        Rows.fetched += len(rows)
        return rows


class CountingConnection(sqlite3.Connection):
    def cursor(self, factory=CountingCursor):  # type: ignore[no-untyped-def]
        return super().cursor(factory)


