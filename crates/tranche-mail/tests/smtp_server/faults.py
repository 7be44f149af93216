"""aiosmtpd handlers that fail on purpose, for tranche-mail's fault tests.

    PYTHONPATH=tests/smtp_server python3 -m aiosmtpd -n -l 127.0.0.1:PORT \
        -c faults.TempFailFirst N MAILDIR
    PYTHONPATH=tests/smtp_server python3 -m aiosmtpd -n -l 127.0.0.1:PORT \
        -c faults.RejectRecipient MAILDIR
"""

from aiosmtpd.handlers import Mailbox


class TempFailFirst(Mailbox):
    """Answers 451 at the end of DATA for the first N messages, then delivers to the
    maildir like the stock Mailbox handler."""

    def __init__(self, n, mail_dir):
        super().__init__(mail_dir)
        self.remaining = int(n)

    async def handle_DATA(self, server, session, envelope):
        if self.remaining > 0:
            self.remaining -= 1
            return "451 4.3.0 Mail server temporarily rejected message"
        return await super().handle_DATA(server, session, envelope)

    @classmethod
    def from_cli(cls, parser, *args):
        if len(args) != 2:
            parser.error("usage: faults.TempFailFirst N MAILDIR")
        return cls(*args)


class RejectRecipient(Mailbox):
    """Refuses every recipient with 550, quoting the address as real servers do."""

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
