"""Where router parameters live: the artifact shipped in the repository, and the ones operators promoted.

Promoted routers are rows of the database (``router_artifacts``), so a promotion reaches every app replica that
shares the database within seconds, and the history of what was live, who promoted it and why stays readable.
A candidate from training is a JSON file until it is promoted; promotion refuses one that does not build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from core.errors import TandemError
from storage.db import Database
from storage.tables import RouterArtifact, utcnow

SHIPPED_ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "router.json"


@dataclass(frozen=True)
class LiveArtifact:
    version: int            # 0: the shipped artifact
    params: dict[str, Any]
    source: str             # "shipped" or "promoted by <who> at <when>: <note>"


def candidate_path(home: Path) -> Path:
    """Where feedback retraining leaves its candidate for an operator to promote."""
    return home / "router" / "candidate.json"


def read_artifact(path: Path) -> dict[str, Any]:
    """The parameters in ``path``; a missing or unreadable file is one clear error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TandemError(f"router artifact {path} is missing. Fix: `tandem router train`, or retrain from "
                          "feedback in the console") from None
    except (OSError, ValueError) as exc:
        raise TandemError(f"router artifact {path} is unreadable ({exc.__class__.__name__}). Fix: train it again"
                          ) from None
    if not isinstance(data, dict):
        raise TandemError(f"router artifact {path} is not a JSON object")
    return data


def _newest_live(what: Any = RouterArtifact) -> Any:
    """The query for the live promoted router (the newest one not retired): ``what`` is the row or a column."""
    return select(what).where(col(RouterArtifact.retired).is_(False)).order_by(col(RouterArtifact.id).desc()).limit(1)


def live_version(db: Database) -> int:
    """The id of the live promoted router, 0 when the shipped one is live (one indexed query)."""
    with db.session() as session:
        row = session.exec(_newest_live(RouterArtifact.id)).first()
    return int(row or 0)


def live(db: Database) -> LiveArtifact:
    with db.session() as session:
        row = session.exec(_newest_live()).first()
    if row is None:
        return LiveArtifact(0, read_artifact(SHIPPED_ARTIFACT), "shipped")
    return LiveArtifact(int(row.id or 0), dict(row.params),
                        f"promoted by {row.author} at {row.created_at:%Y-%m-%d %H:%M}: {row.note}".rstrip(": "))


def history(db: Database, limit: int = 20) -> list[RouterArtifact]:
    with db.session() as session:
        return list(session.exec(select(RouterArtifact).order_by(col(RouterArtifact.id).desc()).limit(limit)))


def promote(db: Database, candidate: Path | dict[str, Any], author: str, note: str = "",
            router_name: str = "evidence") -> int:
    """Make ``candidate`` live in every replica; returns its version. A candidate that does not build is refused
    before anything changes."""
    from chains.routers import build_router

    params = read_artifact(candidate) if isinstance(candidate, Path) else dict(candidate)
    try:
        build_router(router_name, params)
    except Exception as exc:
        raise TandemError(f"the candidate router does not build ({exc.__class__.__name__}: {exc}); not promoted"
                          ) from None
    row = RouterArtifact(author=author or "unknown", note=note, params=params)
    with db.session() as session:
        session.add(row)
        session.commit()
        session.refresh(row)
    return int(row.id or 0)


def rollback(db: Database, author: str) -> LiveArtifact:
    """Retire the live promoted router: the one promoted before it (or the shipped one) is live again."""
    with db.session() as session:
        row = session.exec(_newest_live()).first()
        if row is None:
            raise TandemError("nothing to roll back: the shipped router is live")
        row.retired, row.retired_by, row.retired_at = True, author or "unknown", utcnow()
        session.add(row)
        session.commit()
    return live(db)
