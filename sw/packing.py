"""Vectorized packing of equal-width integer lanes into little-endian memory words (host side).

The memory images of every block (:mod:`sw.gae.layout`, :mod:`sw.learner.layout`) put lane
``p`` of a word at bits ``p * w .. p * w + w - 1``, little end first, and pad the word to a
whole number of bytes. These two functions build and read such images with numpy alone (no
Python loop per lane or per word): byte-aligned widths of 8, 16, 32 or 64 bits are cast into a
view of the image, other widths go through :func:`numpy.packbits` / :func:`numpy.unpackbits`.
"""

import numpy as np

__all__ = ["pack_lanes", "unpack_lanes"]

#: numpy dtypes of byte-aligned lanes (little-endian), by lane width: (unsigned, signed).
LANE_DTYPES = {8: ("<u1", "<i1"), 16: ("<u2", "<i2"), 32: ("<u4", "<i4"), 64: ("<u8", "<i8")}


def pack_lanes(lanes, width: int, words):
    """Write ``lanes`` [W, n] (integers or bools; the low ``width`` bits of each, two's
    complement) into ``words`` [W, word_bytes] (uint8, zeroed by the caller, ``n * width``
    bits at most ``8 * word_bytes``). Returns ``words``."""
    lanes = np.asarray(lanes)
    if lanes.dtype.kind not in "biu":
        lanes = lanes.astype(np.int64)
    W, n = lanes.shape
    if width in LANE_DTYPES:
        # casting to the unsigned lane type keeps the low bits (modular), as a mask does
        words[:, :n * width // 8].view(LANE_DTYPES[width][0])[...] = lanes
        return words
    if width == 1:
        bits = (lanes & 1).astype(np.uint8)
    else:
        bits = ((lanes.astype(np.int64)[:, :, None] >> np.arange(width, dtype=np.int64)) & 1
                ).astype(np.uint8)
    packed = np.packbits(bits.reshape(W, n * width), axis=1, bitorder="little")
    words[:, :packed.shape[1]] = packed
    return words


def unpack_lanes(words, n: int, width: int, *, signed: bool):
    """The ``[W, n]`` int64 lanes of ``words`` [W, word_bytes] (uint8); ``signed`` lanes of
    more than one bit are sign-extended."""
    signed = bool(signed and width > 1)
    if width in LANE_DTYPES:
        return words[:, :n * width // 8].view(LANE_DTYPES[width][signed]).astype(np.int64)
    W = words.shape[0]
    bits = np.unpackbits(words[:, :-(-n * width // 8)], axis=1, count=n * width,
                         bitorder="little")
    if width == 1:
        return bits.astype(np.int64)
    v = bits.reshape(W, n, width).astype(np.int64) @ (
        np.int64(1) << np.arange(width, dtype=np.int64))
    if signed:
        v -= (v >> (width - 1)) << width
    return v
