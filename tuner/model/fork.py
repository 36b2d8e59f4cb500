"""A block of changes to a :class:`~tuner.model.snapshot.Snapshot`, kept only if committed."""

from __future__ import annotations

from collections.abc import Callable


class Fork:
    """A block of changes :meth:`Snapshot.forked` reverts when it ends (also by an exception),
    unless committed: a context manager over the snapshot's journal of undo steps, undoing
    those logged after it was made."""

    __slots__ = ("_journal", "_marker", "committed")

    def __init__(self, journal: list[Callable[[], None]]) -> None:
        self.committed = False
        self._journal = journal
        self._marker = len(journal)

    def commit(self) -> None:
        """Keep the block's changes."""
        self.committed = True

    def __enter__(self) -> Fork:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.committed:
            journal, marker = self._journal, self._marker
            while len(journal) > marker:
                journal.pop()()
