#!/usr/bin/env python3
"""pyHanko side of the tranche-sign benchmark: times pyHanko's library API on the same
contract note and signing identity, N files in one process (imports and key loading
excluded), and prints wall and CPU ms/note.

    cargo run --release -p tranche-sign --example bench_sign -- --dir DIR [N] [NOTE.pdf]
    python3 bench/sign-pyhanko.py DIR [N]

DIR holds what bench_sign wrote: note.pdf, note-r6.pdf (encrypted by tranche-sign, user
password ABCDE1234F) and demo-signer.p12 (password from BENCH_P12_PASSWORD, default
"bench-demo"). Needs `pip install pyhanko pyhanko-certvalidator`.
"""
import os
import sys
import time
from io import BytesIO

from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.pdf_utils.writer import copy_into_new_writer
from pyhanko.sign import signers
from pyhanko.sign.fields import SigSeedSubFilter

USER = "ABCDE1234F"
OWNER = "owner-Secret-42"


def main():
    folder = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    password = os.environ.get("BENCH_P12_PASSWORD", "bench-demo").encode()
    signer = signers.SimpleSigner.load_pkcs12(
        os.path.join(folder, "demo-signer.p12"), passphrase=password
    )
    meta = signers.PdfSignatureMetadata(
        field_name="Signature1",
        subfilter=SigSeedSubFilter.PADES,
        md_algorithm="sha256",
        reason="Contract note",
    )
    pdf_signer = signers.PdfSigner(meta, signer)
    with open(os.path.join(folder, "note.pdf"), "rb") as f:
        plain = f.read()
    with open(os.path.join(folder, "note-r6.pdf"), "rb") as f:
        encrypted = f.read()

    def sign_plain():
        out = BytesIO()
        pdf_signer.sign_pdf(IncrementalPdfFileWriter(BytesIO(plain)), output=out)
        return out

    def sign_encrypted():
        # Re-open the encrypted file with the user password, then sign (pyHanko's way).
        w = IncrementalPdfFileWriter(BytesIO(encrypted))
        w.encrypt(USER)
        out = BytesIO()
        pdf_signer.sign_pdf(w, output=out)
        return out

    def encrypt_then_sign():
        w = copy_into_new_writer(PdfFileReader(BytesIO(plain)))
        w.encrypt(OWNER, USER)
        buf = BytesIO()
        w.write(buf)
        iw = IncrementalPdfFileWriter(buf)
        iw.encrypt(USER)
        out = BytesIO()
        pdf_signer.sign_pdf(iw, output=out)
        return out

    print(f"pyHanko, {n} notes of {len(plain)} bytes, one process")
    for name, work in [
        ("sign only (plain note)", sign_plain),
        ("sign an R6-encrypted note (re-open + sign)", sign_encrypted),
        ("encrypt R6 + re-open + sign", encrypt_then_sign),
    ]:
        work()  # warm-up
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(n):
            work()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        print(
            f"  {name:45} {1000 * elapsed / n:8.2f} ms/note wall"
            f" {1000 * cpu / n:8.2f} ms/note CPU"
        )


if __name__ == "__main__":
    main()
