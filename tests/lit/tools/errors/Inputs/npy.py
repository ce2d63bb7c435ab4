"""Writes a .npy file (format version 1.0) without NumPy.

    npy.py OUT.npy DESCR SHAPE [VALUE ...]

DESCR is the dtype as NumPy writes it (<f4, <i8, |b1, ...), SHAPE a comma
list ("2,3"; "" for a scalar); the values, C order, are packed with the
struct code of DESCR. An unknown DESCR is written as given, with zero bytes
of data, so that readers can be tested on it.
"""
import struct
import sys

CODES = {"<f4": "f", "<f8": "d", "<f2": "e", "<i4": "i", "<i8": "q",
         "<u2": "H", "|b1": "?", "|u1": "B"}


def main(out, descr, shape, *values):
    dims = tuple(int(d) for d in shape.split(",") if d)
    dims_text = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
    header = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }"
              % (descr, dims_text))
    # Magic (6) + version (2) + length (2) + header + "\n", to 64 bytes.
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * (pad % 64) + "\n"
    code = CODES.get(descr)
    data = b""
    if code:
        conv = float if code in "fde" else int
        data = struct.pack("<" + code * len(values), *map(conv, values))
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1") + data)


if __name__ == "__main__":
    main(*sys.argv[1:])
