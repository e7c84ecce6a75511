"""One connection lifecycle for the four client faces (saihm/client/_lifecycle.py): the same
checks before any connection, in the same words, and the same idempotent close."""

from __future__ import annotations

import asyncio

import pytest

from saihm.client import Admin, AsyncAdmin, AsyncClient, Client, ClientError, _lifecycle

CREDENTIAL = "Bearer lifecycle-s3cret-never-shown"
FACES = (Client, AsyncClient, Admin, AsyncAdmin)
#: What the lifecycle owns; a face that defines one of these again has copied it back.
LIFECYCLE = ("__aenter__", "__aexit__", "aclose", "__enter__", "__exit__", "close", "_run")


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
def test_no_face_defines_the_lifecycle_again(face: type) -> None:
    copied = [name for name in LIFECYCLE if name in vars(face)]
    assert not copied, (face.__name__, copied)
    owner = _lifecycle.SyncFace if hasattr(face, "close") else _lifecycle.AsyncFace
    assert issubclass(face, owner)


@pytest.mark.parametrize("face", FACES, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number of seconds"),
        ({"tls_pin_sha256": "ab" * 32}, "a certificate pin needs an https endpoint"),
    ],
)
def test_every_face_refuses_the_same_settings_in_the_same_words(
    face: type, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ClientError) as caught:
        face("http://127.0.0.1:9/", CREDENTIAL, **kwargs)
    assert (caught.value.kind, str(caught.value)) == ("config", message)
    assert "s3cret" not in repr(caught.value)


def test_close_is_idempotent_on_every_face_opened_or_not() -> None:
    for face in (Client, Admin):
        sync = face("http://127.0.0.1:9/", CREDENTIAL)
        sync.close()
        sync.close()
        with face("http://127.0.0.1:9/", CREDENTIAL) as entered:
            assert entered.__class__ is face
        entered.close()

    async def both() -> None:
        for face in (AsyncClient, AsyncAdmin):
            client = face("http://127.0.0.1:9/", CREDENTIAL)
            async with client as entered:
                assert entered is client and client._session is not None
            assert client._session is None
            await client.aclose()
            await client.aclose()

    asyncio.run(both())
