"""A product photo that finds nothing: the reply says so honestly and the conversation goes to a person with the photo.
Real parts: tests/assets/no_text.png (no barcode, no text) sent to `/api/v1/chat` (the real API in process, the real
MediaReader with zxing-cpp and RapidOCR), the real chain over the shared test feed (MiniLM, Chroma) on the session
database, and the console's inbox page (AppTest) over that database. The catalog rows and the conversation are removed
afterwards, so no other test's chain finds a catalog."""

from __future__ import annotations

import base64
import io

import pytest
from sqlmodel import col, delete

from catalog.live import LiveCatalog
from catalog.log import CatalogImport, CatalogSearchLog
from catalog.store import CatalogAttribute, CatalogProduct, CatalogState
from chains.conversation import PHOTO, WAITING, Conversations
from storage.tables import ChatMessage, ConversationEvent, ConversationState, OperatorSeen
from tests.api import api_client
from tests.catalog.shop import write_feed
from tests.conftest import make_runtime
from tests.console.conftest import clean_logins, new_app, sign_in  # noqa: F401  (clean_logins: a fixture)
from tests.ui.conftest import ASSETS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_logins")]
SESSION = "photo-not-found-1"


@pytest.fixture()
def shop_on_session_db(settings, db, encoder, demo_kb, tmp_path):
    def wipe() -> None:
        with db.session() as session:
            for table in (CatalogProduct, CatalogAttribute, CatalogState, CatalogImport, CatalogSearchLog):
                session.exec(delete(table))
            for table in (ConversationState, ConversationEvent, ChatMessage):
                session.exec(delete(table).where(col(table.session_id) == SESSION))  # type: ignore[attr-defined]
            session.exec(delete(OperatorSeen))
            session.commit()

    wipe()
    live = LiveCatalog(db, encoder, chroma_path=tmp_path / "chroma")
    live.open().ingest(write_feed(tmp_path / "feed.tsv"))
    runtime = make_runtime(settings, db, demo_kb, catalog=live)
    try:
        yield runtime
    finally:
        runtime.close()
        wipe()


def test_a_photo_with_no_barcode_and_no_text_is_answered_honestly_and_handed_to_a_person_with_the_photo(
        shop_on_session_db, settings, db):
    from PIL import Image

    photo = base64.b64encode((ASSETS / "no_text.png").read_bytes()).decode()
    with api_client(settings, shop_on_session_db) as client:
        body = client.post("/api/v1/chat", json={"message": "what is this?", "session_id": SESSION,
                                                 "images": [f"data:image/png;base64,{photo}"]}).json()
    assert body["route"] == "handoff" and body["products"] == []
    assert body["answer"].startswith("I couldn't find this product from the photo: I read no barcode in it, and no "
                                     "text on it.")
    assert "I've passed your photo to a colleague, who will look at it and reply here." in body["answer"]
    assert body["handoff"]["status"] == WAITING

    state = Conversations(db).state(SESSION)
    assert (state.status, state.trigger) == (WAITING, PHOTO)
    assert state.reason == "product photo not recognised: no barcode and no text read"
    [kept] = state.packet["photos"]
    assert (kept["codes"], kept["text"]) == ([], "")
    assert kept["thumbnail"].startswith("data:image/jpeg;base64,")
    copy = Image.open(io.BytesIO(base64.b64decode(kept["thumbnail"].split(",", 1)[1])))
    assert copy.size == (320, 200)  # no_text.png is 320 x 200: kept whole, as the customer sent it

    at = sign_in(new_app().run())
    at = at.switch_page("views/inbox.py").run()
    at = at.selectbox(key="inbox_selected").set_value(SESSION).run()
    assert not at.exception, at.exception
    assert any(m.value.startswith("**Photo 1 the customer sent**") for m in at.markdown)
    assert "Barcode read: none · Text read: none" in [c.value for c in at.caption]
    [shown] = at.get("image")
    assert len(shown.value) == 1 and shown.value[0]  # the copy, served to the page as a media file
