"""What TLS key exchange ``saihm serve`` offers, logged at start-up (saihm-protocol: TLS key
exchange SHOULD include a post-quantum or hybrid group; docs/operations.md "TLS").

Python's ``ssl`` reports the negotiated key-exchange group only from Python 3.15
(``SSLObject.group()``); older versions report the protocol version and cipher but not the group.
:func:`key_exchange` runs one in-memory handshake against the server's own context and reports
what it can: the OpenSSL version, the negotiated version and cipher, and the group when Python
exposes it. OpenSSL before 3.5 has no post-quantum or hybrid group at all.
"""

from __future__ import annotations

import re
import ssl

__all__ = ["PQ_GROUP", "key_exchange"]

#: Names of post-quantum or hybrid key-exchange groups (OpenSSL 3.5 and later, BoringSSL).
PQ_GROUP = re.compile(r"mlkem|kyber", re.IGNORECASE)
HANDSHAKE_ROUNDS = 8


def _openssl_has_pq_groups(version: tuple[int, ...]) -> bool:
    """OpenSSL 3.5 is the first release with ML-KEM hybrid groups (X25519MLKEM768)."""
    return version[:2] >= (3, 5)


def key_exchange(context: ssl.SSLContext) -> dict[str, object]:
    """One handshake of ``context`` (a server context with its certificate loaded) against an
    in-memory client; returns ``{"openssl", "tlsVersion", "cipher", "group", "postQuantum"}``.

    ``group`` is None where Python cannot report it; ``postQuantum`` is then False when this
    OpenSSL has no post-quantum group, and None when it might have negotiated one.
    """
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = context.wrap_bio(server_in, server_out, server_side=True)
    client = client_context.wrap_bio(client_in, client_out)
    done = {id(server): False, id(client): False}
    for _ in range(HANDSHAKE_ROUNDS):
        for end in (client, server):
            if not done[id(end)]:
                try:
                    end.do_handshake()
                    done[id(end)] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if all(done.values()):
            break
    cipher = server.cipher()
    group_of = getattr(server, "group", None)
    group = group_of() if callable(group_of) and all(done.values()) else None
    if group is not None:
        post_quantum: bool | None = bool(PQ_GROUP.search(group))
    else:
        post_quantum = None if _openssl_has_pq_groups(ssl.OPENSSL_VERSION_INFO) else False
    return {
        "openssl": ssl.OPENSSL_VERSION,
        "tlsVersion": server.version(),
        "cipher": cipher[0] if cipher else None,
        "group": group,
        "postQuantum": post_quantum,
    }
