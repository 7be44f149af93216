"""An aiosmtpd server requiring TLS and AUTH, for tranche-mail's TLS tests.

    tls_auth_server.py PORT MAILDIR CERT KEY starttls|implicit

Accepts one login: TEST_SMTP_USER / TEST_SMTP_PASSWORD from the environment. Writes
messages to MAILDIR/new like the stock Mailbox handler.
"""

import asyncio
import os
import ssl
import sys

from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    port, maildir, cert, key, mode = sys.argv[1:6]
    user = os.environ["TEST_SMTP_USER"].encode()
    password = os.environ["TEST_SMTP_PASSWORD"].encode()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == user
            and auth_data.password == password
        )
        # handled=False: aiosmtpd then answers 535 itself.
        return AuthResult(success=ok, handled=False)

    handler = Mailbox(maildir)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    if mode == "starttls":
        def factory():
            return SMTP(handler, tls_context=context, require_starttls=True,
                        authenticator=authenticator, auth_required=True, loop=loop)
        server_ssl = None
    elif mode == "implicit":
        def factory():
            return SMTP(handler, authenticator=authenticator, auth_required=True,
                        auth_require_tls=False, loop=loop)
        server_ssl = context
    else:
        sys.exit(f"unknown mode {mode}")

    server = loop.run_until_complete(
        loop.create_server(factory, host="127.0.0.1", port=int(port), ssl=server_ssl))
    try:
        loop.run_forever()
    finally:
        server.close()


if __name__ == "__main__":
    main()
