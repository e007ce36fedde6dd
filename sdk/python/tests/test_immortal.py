"""The marker of the snapshot's objects (``wasmctrl.guest.immortal``): which objects it lists
and how it is laid out; ``host/build/src/immortal.rs`` reads it."""

from __future__ import annotations

import binascii
import struct
import sys

from wasmctrl.guest import immortal

#: A module-level object, and a function whose constant is only its code object's.
SENTINEL = ["kept", "by", "the", "module"]


def constant_holder() -> str:
    return "a constant only this code object holds: 5b1f0e"


def test_only_cpython_3_14_on_32_bits_is_marked() -> None:
    # The host's interpreter (64-bit, whatever version) is not one whose counts the build knows.
    assert sys.maxsize >= 2**32
    assert immortal.immortal_count() is None
    assert immortal.mark() == 0
    assert immortal._marker == bytearray()


def test_reachable_objects_include_module_state_and_code_constants() -> None:
    found = {id(o) for o in immortal.reachable()}
    assert id(SENTINEL) in found
    assert id(SENTINEL[0]) in found
    assert id(constant_holder) in found
    assert id(constant_holder.__code__) in found
    const = next(c for c in constant_holder.__code__.co_consts if isinstance(c, str) and "5b1f0e" in c)
    assert id(const) in found, "a code object's constants are listed though no collector type holds them"


def test_each_object_is_listed_once() -> None:
    objects = immortal.reachable()
    assert len({id(o) for o in objects}) == len(objects)


def test_the_marker_layout_is_what_the_build_reads() -> None:
    marker = immortal.encode(5 << 28, [16, 24, 4096])
    assert marker.startswith(immortal.MAGIC)
    body = bytes(marker[len(immortal.MAGIC) : -4])
    assert struct.unpack("<6I", body) == (immortal.VERSION, 5 << 28, 3, 16, 24, 4096)
    (checksum,) = struct.unpack("<I", marker[-4:])
    assert checksum == binascii.crc32(body)
