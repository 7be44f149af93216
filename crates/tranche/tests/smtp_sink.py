"""A real SMTP server for the contract-note tests (aiosmtpd), with test knobs:
recipients listed in DIR/reject.txt are refused with 550 at RCPT (read on every
message, so a test can change it); while DIR/hold exists, messages wait before they
are accepted (a night cannot finish before the test has set something up); every
accepted message is written whole to DIR/new/N.eml with an X-RcptTo header. Prints
"ready" once listening.

usage: python3 smtp_sink.py PORT DIR
"""

import asyncio
import itertools
import os
import sys
import threading

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, directory):
        self.dir = directory
        self.seq = itertools.count()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        reject = os.path.join(self.dir, "reject.txt")
        if os.path.exists(reject):
            with open(reject) as f:
                if address in f.read().split():
                    return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        while os.path.exists(os.path.join(self.dir, "hold")):
            await asyncio.sleep(0.02)
        n = next(self.seq)
        tmp = os.path.join(self.dir, "tmp", f"{n}.eml")
        with open(tmp, "wb") as f:
            f.write(b"X-RcptTo: " + ",".join(envelope.rcpt_tos).encode() + b"\r\n")
            f.write(envelope.original_content)
        os.rename(tmp, os.path.join(self.dir, "new", f"{n}.eml"))
        return "250 2.0.0 accepted"


def main():
    port, directory = int(sys.argv[1]), sys.argv[2]
    for sub in ("new", "tmp"):
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    controller = Controller(Sink(directory), hostname="127.0.0.1", port=port)
    controller.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
