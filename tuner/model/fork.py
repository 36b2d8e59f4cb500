"""A block of changes to a :class:`~tuner.model.snapshot.Snapshot`, kept only if committed."""


class Fork:
    """A block of changes :meth:`Snapshot.forked` reverts when it ends, unless committed."""

    __slots__ = ("committed",)

    def __init__(self) -> None:
        self.committed = False

    def commit(self) -> None:
        """Keep the block's changes."""
        self.committed = True
