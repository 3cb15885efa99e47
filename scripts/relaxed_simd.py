#!/usr/bin/env python3
"""Rewrites the relaxed-SIMD instructions of a wasm module from LLVM 14's prototype opcodes to the
standard ones, in place.

Debian's Emscripten (3.1.6) uses LLVM 14, whose -mrelaxed-simd predates the standard encoding: its
`__builtin_wasm_fma_f32x4` emits opcode 0xfd 0xaf 0x01, which engines that ship relaxed SIMD
(Chrome 114+, Node 20 with --experimental-wasm-relaxed-simd) reject. The standard
`f32x4.relaxed_madd` is 0xfd 0x85 0x02 (0x105): the same length, so rewriting moves no offsets.

The code section is decoded instruction by instruction (an opcode byte can also be an immediate's
byte, so a byte search would be wrong), and any prototype relaxed opcode this script does not map
is an error, as is any opcode it cannot decode. Only what src/kernels/vec.h and simd.h use is mapped:

    0xaf f32x4.fma(a, b, c)  -> 0x105 f32x4.relaxed_madd(a, b, c)  = a * b + c
    0xb0 f32x4.fms(a, b, c)  -> 0x106 f32x4.relaxed_nmadd(a, b, c) = -(a * b) + c
    0xa2 i8x16.relaxed_swizzle(a, b) -> 0x112 i16x8.relaxed_dot_i8x16_i7x16_s(a, b)

The operands keep their order; the meaning is the standard one (a * b + c), which is what the
kernels' tdm_madd asks for. LLVM 14 has no relaxed integer dot product: src/kernels/simd.h's
tdm_relaxed_dot writes it as the prototype swizzle (two v128 in, one out, like the dot; no kernel
swizzles otherwise), and this script makes it the dot (tests/c/kernel_selftest.c checks each kernel
against its scalar reference in the rewritten module).

    python3 scripts/relaxed_simd.py MODULE.wasm
"""

import sys

REWRITE = {0xAF: 0x105, 0xB0: 0x106, 0xA2: 0x112}
# The sub-opcodes below 0x100 that SIMD128 leaves unassigned, where LLVM 14 put its other prototype
# relaxed instructions (those REWRITE maps are rewritten before this check; the rest, trunc,
# laneselect, min/max, f64x2 fma, are unused): finding one means a kernel started using it without a
# mapping here. So is any opcode past SIMD128's 0xff other than those this script writes.
UNASSIGNED = {0x9A, 0xA2, 0xA5, 0xA6, 0xAF, 0xB0, 0xB2, 0xB3, 0xB4, 0xBB, 0xC2, 0xC5, 0xC6, 0xCF, 0xD0, 0xD2, 0xD3, 0xD4, 0xE2, 0xEE}


class Reader:
    def __init__(self, data: bytearray, pos: int, end: int):
        self.data, self.pos, self.end = data, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError(f"unexpected end of code at byte {self.pos}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def uleb(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def sleb(self) -> None:
        while self.byte() & 0x80:
            pass

    def skip(self, n: int) -> None:
        if self.pos + n > self.end:
            raise ValueError(f"unexpected end of code at byte {self.pos}")
        self.pos += n

    def memarg(self) -> None:
        self.uleb()
        self.uleb()


def blocktype(r: Reader) -> None:
    b = r.data[r.pos]
    if b == 0x40 or b in (0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F):
        r.pos += 1
    else:
        r.sleb()  # a type index (s33)


def simd(r: Reader, at: int) -> int:
    """Decodes one 0xfd instruction whose sub-opcode starts at r.pos; returns 1 if it was rewritten."""
    start = r.pos
    op = r.uleb()
    if op in REWRITE:
        if r.pos - start != 2:
            raise ValueError(f"opcode 0x{op:x} at byte {start} is not a 2-byte LEB")
        new = REWRITE[op]
        r.data[start], r.data[start + 1] = (new & 0x7F) | 0x80, new >> 7
        return 1
    if op in UNASSIGNED or (op > 0xFF and op not in REWRITE.values()):
        raise ValueError(f"SIMD opcode 0x{op:x} at byte {at} is not SIMD128 and has no mapping in scripts/relaxed_simd.py")
    if op <= 11 or op in (92, 93):  # loads / stores
        r.memarg()
    elif op in (12, 13):  # v128.const, i8x16.shuffle
        r.skip(16)
    elif 21 <= op <= 34:  # extract / replace lane
        r.skip(1)
    elif 84 <= op <= 91:  # load / store lane
        r.memarg()
        r.skip(1)
    return 0


def body(r: Reader) -> int:
    count = 0
    for _ in range(r.uleb()):  # local declarations
        r.uleb()
        r.byte()
    while r.pos < r.end:
        at = r.pos
        op = r.byte()
        if op in (0x02, 0x03, 0x04):
            blocktype(r)
        elif op in (0x0C, 0x0D, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0xD2):
            r.uleb()
        elif op == 0x0E:  # br_table
            for _ in range(r.uleb() + 1):
                r.uleb()
        elif op == 0x11:  # call_indirect
            r.uleb()
            r.uleb()
        elif op == 0x1C:  # select t*
            r.skip(r.uleb())
        elif 0x28 <= op <= 0x3E:
            r.memarg()
        elif op in (0x3F, 0x40, 0xD0):
            r.byte()
        elif op == 0x41 or op == 0x42:
            r.sleb()
        elif op == 0x43:
            r.skip(4)
        elif op == 0x44:
            r.skip(8)
        elif op == 0xFC:
            sub = r.uleb()
            if sub == 8:
                r.uleb()
                r.byte()
            elif sub in (9, 13, 15, 16, 17):
                r.uleb()
            elif sub == 10:
                r.skip(2)
            elif sub == 11:
                r.skip(1)
            elif sub in (12, 14):
                r.uleb()
                r.uleb()
            elif sub > 17:
                raise ValueError(f"unknown 0xfc sub-opcode {sub} at byte {at}")
        elif op == 0xFD:
            count += simd(r, at)
        elif op == 0xFE:  # atomics
            sub = r.uleb()
            if sub == 3:
                r.byte()
            else:
                r.memarg()
        elif op in (0x00, 0x01, 0x05, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1) or 0x45 <= op <= 0xC4:
            pass
        else:
            raise ValueError(f"opcode 0x{op:02x} at byte {at} is not one this script decodes")
    return count


def rewrite(data: bytearray) -> int:
    if data[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a wasm module (version 1)")
    r = Reader(data, 8, len(data))
    count = 0
    while r.pos < len(data):
        section = r.byte()
        size = r.uleb()
        end = r.pos + size
        if section == 10:  # code
            for _ in range(r.uleb()):
                n = r.uleb()
                count += body(Reader(data, r.pos, r.pos + n))
                r.pos += n
        r.pos = end
    return count


def main() -> None:
    path = sys.argv[1]
    data = bytearray(open(path, "rb").read())
    try:
        n = rewrite(data)
    except ValueError as e:
        sys.exit(f"{path}: {e}")
    open(path, "wb").write(data)
    print(f"{path}: {n} relaxed-SIMD instructions in the standard encoding")


if __name__ == "__main__":
    main()
