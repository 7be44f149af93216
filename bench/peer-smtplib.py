#!/usr/bin/env python3
"""Python's smtplib as the peer for bench_mail: N contract-note mails with an
attachment of the same size, built with the email package (policy SMTP: CRLF) and
sent over one connection in one process, as a typical Python mailer does.

    bench/peer-smtplib.py --url smtp://127.0.0.1:2525 --count 2000

Prints one JSON line.
"""

import argparse
import json
import smtplib
import time
import urllib.parse
from email.message import EmailMessage
from email.policy import SMTP


def sample_pdf(n):
    # Same generator as tranche_mail::conformance::sample_pdf: incompressible bytes.
    head = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\r\n.\r\n\n.\n\r\0From x\r\n"
    out = bytearray(head)
    x = 0x2545F491
    while len(out) < n:
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(x >> 24)
    return bytes(out[:n])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--attachment-bytes", type=int, default=150_000)
    args = ap.parse_args()
    url = urllib.parse.urlparse(args.url)
    pdf = sample_pdf(args.attachment_bytes)

    started = time.perf_counter()
    size = 0
    with smtplib.SMTP(url.hostname, url.port or 25) as smtp:
        for i in range(args.count):
            msg = EmailMessage(policy=SMTP)
            msg["Message-ID"] = f"<CN-py-{i:07}@broker.example>"
            msg["From"] = "Brokér Securities <notes@broker.example>"
            msg["To"] = f"client{i}@client.example"
            msg["Subject"] = "Contract note cum tax invoice 2026-11-20 — net ₹ 1,23,456.70"
            msg.set_content(
                "Dear client,\n\nPlease find attached your contract note for 2026-11-20.\n"
                "The PDF is protected with your PAN.\n\n-- \nBrokér Securities\n"
            )
            msg.add_attachment(pdf, maintype="application", subtype="pdf",
                               filename="CN-2026-11-20-C0001.pdf")
            data = msg.as_bytes()
            size = len(data)
            smtp.sendmail("notes@broker.example", [f"client{i}@client.example"], data)
    secs = time.perf_counter() - started
    print(json.dumps({
        "client": "python smtplib", "pool": 1, "messages": args.count,
        "message_bytes": size, "seconds": round(secs, 3),
        "msgs_per_sec": round(args.count / secs, 1),
        "mb_per_sec": round(args.count * size / secs / 1e6, 1), "connections": 1,
    }))


if __name__ == "__main__":
    main()
