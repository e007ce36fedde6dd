"""SQL through the host's ``sql`` capability: statements with bound values and host-quoted
identifiers, on a database the operator granted and the manifest declares
(``Manifest.capability("sql:<name>")``), through ``ctx.sql("<name>")``::

    db = ctx.sql("students")
    db.execute(
        Statement("INSERT INTO {0} (id, age) VALUES ($1, $2)")
        .identifier(spec.table)
        .bind(ctx.key)
        .bind(spec.age)
    )

Values are Python's own ``None``, ``bool``, ``int``, ``float`` and ``str``: the contract's
``value`` variant has exactly those cases, so nothing wraps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .error import Error

#: A parameter or column value. The host converts it to and from the column's SQL type: ``int``
#: to smallint/integer/bigint (range-checked), ``float`` to real/double, ``str`` to any text
#: type and also to json/jsonb (the text must be JSON) and numeric columns.
Value = None | bool | int | float | str

_I64 = range(-(2**63), 2**63)


def checked(value: object) -> Value:
    """``value`` if the contract can carry it, else ``TypeError`` (or ``ValueError`` for an
    integer outside 64 bits)."""
    if value is None or isinstance(value, (bool, float, str)):
        return value
    if isinstance(value, int):
        if value not in _I64:
            raise ValueError(f"sql: integer {value} does not fit in 64 bits")
        return value
    raise TypeError(f"sql: cannot bind a {type(value).__name__} (None, bool, int, float or str)")


@dataclass
class Statement:
    """One statement: values written ``$1``, ``$2``, ... and bound, never spliced; table and
    column names written ``{0}``, ``{1}``, ... and quoted by the host (``{{``/``}}`` for literal
    braces)."""

    query: str
    identifiers: list[str] = field(default_factory=list)
    params: list[Value] = field(default_factory=list)

    def identifier(self, name: str) -> Statement:
        """The next identifier (``{0}``, then ``{1}``, ...). The host checks and quotes it, so
        any text stays exactly one name."""
        self.identifiers.append(name)
        return self

    def bind(self, value: Value) -> Statement:
        """The next parameter (``$1``, then ``$2``, ...)."""
        self.params.append(checked(value))
        return self


@dataclass
class Rows:
    """What one statement returned."""

    #: Column names of the result (empty for statements that return no rows).
    columns: list[str] = field(default_factory=list)
    #: The rows, each with one value per column.
    rows: list[list[Value]] = field(default_factory=list)
    #: Rows inserted, updated, deleted or returned.
    affected: int = 0

    def get(self, row: int, column: str) -> Value:
        """The value of ``column`` in row ``row``; ``KeyError``/``IndexError`` when either is
        not there."""
        if column not in self.columns:
            raise KeyError(column)
        return self.rows[row][self.columns.index(column)]


class SqlError(Exception):
    """A failed SQL call. Raised out of ``reconcile`` uncaught, it becomes the reconcile's
    error as :meth:`to_error` says (as the Rust SDK's ``?`` converts it)."""

    def __init__(self, message: str, sqlstate: str | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.message = message
        #: The SQLSTATE code when the database reported one (``23505``: unique violation).
        self.sqlstate = sqlstate
        #: Whether retrying later could succeed (unreachable, timed out, deadlock).
        self.transient = transient

    def describe(self) -> str:
        """The message with its SQLSTATE, for logs and reconcile errors."""
        if self.sqlstate:
            return f"{self.message} (SQLSTATE {self.sqlstate})"
        return self.message

    def __str__(self) -> str:
        return self.describe()

    def to_error(self) -> Error:
        """As a reconcile error: retried when the database said it was transient, terminal
        otherwise (bad SQL, a violated constraint), since the same input would fail the same
        way."""
        message = f"sql: {self.describe()}"
        return Error.retryable(message) if self.transient else Error.terminal(message)
