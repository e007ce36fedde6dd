"""Marks the snapshot's objects for ``wasmctrl build`` to make immortal.

Every call starts from the interpreter's snapshot, and CPython counts references by writing
into the objects: a call that only *reads* the snapshot's modules, classes, functions and
strings still writes to the pages that hold them (measured on the VirtualMachine seed: of the
~460 pages a call wrote, ~290 held the same bytes again at the end of the call, the counts back
where they were). The host copies every written page back from the snapshot after each call,
so those writes cost a copy per page per call.

CPython 3.12+ leaves the count of an *immortal* object alone (PEP 683; on 32-bit builds a
count of 2**30 or more; CPython's own statically allocated objects are immortal, and Cinder's
``gc.immortalize_heap()`` did this to a whole heap before forking). Python cannot set a
count, so this module only records *which* objects: :func:`mark` collects every object
reachable from the collector's objects at the end of the build, keeps each one alive (a
freed object's first word is the allocator's free-list link, never to be overwritten), and
leaves their addresses in one buffer the build finds in the snapshot's data (``MAGIC``, then
little-endian ``u32``: the layout's version, the count to write, how many addresses, the
addresses, and the CRC-32 of those words). ``wasmctrl build`` then writes the count into each
object's first word (``ob_refcnt`` on 32-bit CPython) in the component's data segments
(``host/build/src/immortal.rs``); on another CPython nothing is marked and the component is
as componentize-py made it.

Safe because nothing a call does depends on a snapshot object being freed: all of the
instance's memory goes when the call ends, an immortal object's finalizer (``__del__``, a
weakref callback) never runs, and CPython's shortcuts for an object only one reference holds
do not apply to them (they are only shortcuts).
"""

from __future__ import annotations

import binascii
import gc
import struct
import sys
from array import array
from collections.abc import Iterable
from types import CodeType
from typing import Any

#: The marker's first bytes. The constant itself is in memory too; the checksum after the
#: addresses is what tells the marker apart.
MAGIC = b"wasmctrl-immortal-objects"
#: The marker's layout version.
VERSION = 1

#: Every marked object, kept alive until the snapshot.
_kept: list[Any] = []
#: The marker itself (see the module's documentation).
_marker = bytearray()


def immortal_count() -> int | None:
    """The count that makes an object immortal on this interpreter, if this module knows it:
    CPython 3.14 on a 32-bit target (``_Py_IMMORTAL_INITIAL_REFCNT``, ``5 << 28``; immortal
    from ``1 << 30``), which is what componentize-py 0.25 bundles."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 14):
        return None
    if sys.maxsize >= 2**32:
        return None
    return 5 << 28


def reachable() -> list[Any]:
    """Every object the collector tracks, and everything they refer to, transitively.

    Whatever this allocates and frees stays in the snapshot as garbage (the build keeps the
    memory's bytes as they are), so the objects seen are bits by address, one 8 KiB bitmap per
    512 KiB of memory holding any, not a set of ids (a million bytes of ints and hash table for
    the seed's ~37,000 objects). Objects are 8-byte aligned; two sharing a slot would only leave
    the second, and what only it refers to, mortal."""
    objects = gc.get_objects()
    seen: dict[int, bytearray] = {}

    def first_sight(o: Any) -> bool:
        slot = id(o) >> 3
        bits = seen.get(slot >> 16)
        if bits is None:
            bits = seen[slot >> 16] = bytearray(1 << 13)
        byte, bit = (slot >> 3) & 0x1FFF, 1 << (slot & 7)
        if bits[byte] & bit:
            return False
        bits[byte] |= bit
        return True

    objects = [o for o in objects if first_sight(o)]
    i = 0
    while i < len(objects):
        o = objects[i]
        objects.extend(r for r in gc.get_referents(o) if first_sight(r))
        if type(o) is CodeType:
            # Not a collector type: its constants and names are no one's referents, yet every
            # `LOAD_CONST` of a mortal constant counts a reference to it.
            objects.extend(r for r in (o.co_consts, o.co_names) if first_sight(r))
        i += 1
    return objects


def encode(count: int, addresses: Iterable[int]) -> bytearray:
    """The marker for ``addresses`` (see the module's documentation)."""
    listed = array("I", addresses)
    if sys.byteorder != "little":
        listed.byteswap()
    body = bytearray(struct.pack("<III", VERSION, count, len(listed)))
    body += listed.tobytes()
    return bytearray(MAGIC) + body + struct.pack("<I", binascii.crc32(body))


def mark() -> int:
    """Marks every reachable object (see the module's documentation); returns how many, 0 where
    the interpreter is not one this module knows."""
    global _kept, _marker
    count = immortal_count()
    if count is None:
        return 0
    _kept = reachable()
    _marker = encode(count, map(id, _kept))
    return len(_kept)
