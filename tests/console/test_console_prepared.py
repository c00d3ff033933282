"""The console's "Prepared answers" page lists the prepared answers with their hit counts and status, and its delete
button tombstones one (rows in the session database, as the idle-time worker writes them)."""

from __future__ import annotations

import pytest
from sqlmodel import delete

from storage.tables import PreparedAnswer
from tests.console.conftest import new_app, sign_in

pytestmark = pytest.mark.slow


@pytest.fixture()
def stored(db):
    rows = [PreparedAnswer(question="Which tent would you recommend for winter camping?",
                           answer="A four-season tent with a full rain fly.", namespace="kb-before-an-edit:1:r:",
                           entry_key="which tent would you recommend for winter camping", kb_version="kb-before-an-edit",
                           group_size=5, sessions=5, tokens=812, hits=3),
            PreparedAnswer(question="Can you write me a short poem about parcels?", answer="Parcels travel far.",
                           namespace="kb-before-an-edit:1:r:", entry_key="can you write me a short poem about parcels",
                           kb_version="kb-before-an-edit", group_size=2, sessions=2, tokens=640)]
    with db.session() as session:
        session.add_all(rows)
        session.commit()
        for row in rows:
            session.refresh(row)
    yield rows
    with db.session() as session:
        session.exec(delete(PreparedAnswer).where(PreparedAnswer.id.in_([r.id for r in rows])))  # type: ignore[union-attr]
        session.commit()


def test_the_page_lists_prepared_answers_with_hits_and_status_and_deletes_one(db, stored, clean_logins):
    at = sign_in(new_app().run())
    at = at.switch_page("views/prepared.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("id")
    tent, poem = stored
    assert table.loc[tent.id, "hits"] == 3 and table.loc[poem.id, "hits"] == 0
    assert set(table["status"]) == {"retired: the KB changed"}  # written under another KB version: not served
    at = at.button(key=f"delete_prepared_{poem.id}").click().run()
    assert not at.exception, at.exception
    with db.session() as session:
        assert session.get(PreparedAnswer, poem.id).deleted and not session.get(PreparedAnswer, tent.id).deleted
    assert list(at.dataframe[0].value["id"]) == [tent.id]
    assert any(f"#{poem.id} deleted" in s.value for s in at.success)
