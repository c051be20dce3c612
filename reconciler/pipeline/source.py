"""What a run reads, as one value: the tree, which commit it is and where it came from, and how to verify it.

A working tree is read where it is; a fetched remote's tree is read from a
materialised copy, so the commit it is (``revision``), the repository it was
taken from (``identity``) and its history (``git_dir``) travel with it. In a
fleet repository ``cluster`` names the cluster whose view is read; ``trust``
(and ``tag``, the tag a remote is followed at) say how the commit is
verified before anything of the tree is read (``repo/verify.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.report import progress

if TYPE_CHECKING:
    from reconciler.pipeline.facts import ClusterFacts
    from reconciler.repo.verify import Trust, Verdict


@dataclass(frozen=True)
class Source:
    """The repository tree a run reads, and what it is (see the module's docstring)."""

    tree: str | Path
    revision: str | None = None
    identity: str | None = None
    git_dir: Path | None = None
    cluster: str | None = None
    trust: Trust | None = None
    tag: str | None = None

    @classmethod
    def of(cls, source: Source | str | Path) -> Source:
        """``source``, or a working tree at the path it names."""
        return source if isinstance(source, Source) else cls(source)

    def verify(self, cluster: ClusterFacts | None) -> tuple[Verdict, ...]:
        """The signatures of the revision about to be read, as ``trust`` asks (none without it).

        A working tree is verified at its HEAD (and refused with uncommitted changes); a fetched remote's tree at
        ``revision`` in ``git_dir``. What the ``cluster`` records as applied (every instance's status objects:
        this tree's settings are not trusted yet) is what a rollback is judged against.
        """
        if self.trust is None:
            return ()
        from reconciler.repo import git_revision
        from reconciler.repo.identity import git_dir as find_git_dir
        from reconciler.repo.verify import verify_revision

        progress.stage("verifying signatures")
        top = Path(self.tree).resolve()
        return verify_revision(self.git_dir or find_git_dir(top), self.revision or git_revision(top), self.trust,
                               tag=self.tag, applied=cluster.applied_revisions() if cluster else [])
