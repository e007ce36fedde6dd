//! Makes the objects of a componentize-py component's interpreter snapshot immortal.
//!
//! Every call starts from the snapshot, and CPython writes an object's reference count each
//! time it takes or drops a reference, so a call that only reads the snapshot's modules,
//! classes and strings still writes the pages holding them, and the host copies every written
//! page back after the call. CPython leaves the count of an *immortal* object alone (PEP 683).
//! Python cannot set a count, so the SDK (`wasmctrl/guest/immortal.py`) records which objects
//! at the end of the build, keeps them alive, and leaves their addresses in the snapshot: a
//! marker made of [`MAGIC`] then little-endian `u32`s: the layout's version, the count to
//! write, how many addresses, the addresses, and the CRC-32 of those words. This module finds
//! that marker in the component's data segments and writes the count into the first word of
//! each object there (a `PyObject`'s `ob_refcnt` on 32-bit CPython), where that word is a
//! plausible count: an address the marker lists but the segments do not hold is left alone.
//!
//! The component's size and structure do not change: only bytes inside data segments do. No
//! marker (another language, another CPython) leaves the component as it was. The marker is
//! what the plugin's own build left in its own sandboxed memory: whatever it lists, the result
//! is that plugin's memory image and nothing else.

use std::ops::Range;

use wasmparser::{DataKind, Encoding, Operator, Parser, Payload};

/// The marker's first bytes, as the SDK writes them.
pub const MAGIC: &[u8] = b"wasmctrl-immortal-objects";
/// The marker layout this build reads.
const VERSION: u32 = 1;
/// A word at or above this is already immortal (CPython 3.14, 32-bit: from `1 << 30`), or not
/// a reference count at all: it is left as it is.
const PLAUSIBLE_COUNT: u32 = 1 << 28;

/// What [`immortalize`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Immortalized {
    /// Objects whose count was written.
    pub objects: usize,
    /// Listed objects that were immortal already (CPython's own, or a second pass).
    pub already: usize,
    /// Listed addresses left alone: no count there (zero, or bytes no segment holds).
    pub unheld: usize,
}

/// One active data segment at a constant address: where its bytes go in linear memory, and
/// where they are in the binary.
#[derive(Debug, Clone)]
struct Segment {
    address: usize,
    bytes: Range<usize>,
}

/// The marker's content.
struct Marker {
    count: u32,
    addresses: Vec<u32>,
}

/// Writes the marker's count into each marked object of `binary` (a component or a core
/// module). `Ok(None)`: there is no marker. An error: the binary does not parse, or holds more
/// than one valid marker; either way nothing was written (writes come after every check).
pub fn immortalize(binary: &mut [u8]) -> Result<Option<Immortalized>, String> {
    let mut found = None;
    for segments in modules(binary)? {
        let memory = Memory {
            binary,
            segments: &segments,
        };
        let mut markers: Vec<Marker> = segments
            .iter()
            .flat_map(|s| {
                find_all(&binary[s.bytes.clone()], MAGIC).map(|at| s.address + at + MAGIC.len())
            })
            .filter_map(|after| Marker::read(&memory, after))
            .collect();
        if markers.len() + usize::from(found.is_some()) > 1 {
            return Err("more than one immortal-objects marker in the snapshot".into());
        }
        if let Some(marker) = markers.pop() {
            found = Some((segments, marker));
        }
    }
    let Some((segments, marker)) = found else {
        return Ok(None);
    };
    let count = marker.count.to_le_bytes();
    let mut done = Immortalized {
        objects: 0,
        already: 0,
        unheld: 0,
    };
    for address in marker.addresses {
        let address = address as usize;
        // The count's four bytes, where the binary holds each (a segment may end inside one).
        let Some(offsets) = (address..address + 4)
            .map(|a| file_offset(&segments, a))
            .collect::<Option<Vec<usize>>>()
        else {
            done.unheld += 1;
            continue;
        };
        match u32::from_le_bytes(std::array::from_fn(|i| binary[offsets[i]])) {
            0 => done.unheld += 1,
            word if word >= PLAUSIBLE_COUNT => done.already += 1,
            _ => {
                for (offset, byte) in offsets.into_iter().zip(count) {
                    binary[offset] = byte;
                }
                done.objects += 1;
            }
        }
    }
    Ok(Some(done))
}

/// Each core module's active data segments at constant addresses in its memory 0, sorted by
/// address.
fn modules(binary: &[u8]) -> Result<Vec<Vec<Segment>>, String> {
    let base = binary.as_ptr() as usize;
    let mut modules = Vec::new();
    // The modules being read: a component's payloads nest its core modules' payloads.
    let mut open: Vec<Option<Vec<Segment>>> = Vec::new();
    for payload in Parser::new(0).parse_all(binary) {
        match payload.map_err(|e| e.to_string())? {
            Payload::Version { encoding, .. } => open.push(match encoding {
                Encoding::Module => Some(Vec::new()),
                Encoding::Component => None,
            }),
            Payload::End(_) => {
                if let Some(Some(mut segments)) = open.pop() {
                    segments.sort_by_key(|s| s.address);
                    modules.push(segments);
                }
            }
            Payload::DataSection(reader) => {
                let Some(Some(segments)) = open.last_mut() else {
                    continue;
                };
                for data in reader {
                    let data = data.map_err(|e| e.to_string())?;
                    let DataKind::Active {
                        memory_index: 0,
                        offset_expr,
                    } = data.kind
                    else {
                        continue;
                    };
                    let mut ops = offset_expr.get_operators_reader();
                    let (Ok(Operator::I32Const { value }), Ok(Operator::End)) =
                        (ops.read(), ops.read())
                    else {
                        continue;
                    };
                    // `data.data` borrows from `binary`: its place in it is a pointer difference.
                    let start = data.data.as_ptr() as usize - base;
                    segments.push(Segment {
                        address: value as u32 as usize,
                        bytes: start..start + data.data.len(),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(modules)
}

/// A module's initial linear memory, read through its data segments (zeros where none
/// writes), without laying it out.
struct Memory<'a> {
    binary: &'a [u8],
    segments: &'a [Segment],
}

impl Memory<'_> {
    /// The little-endian word at `address`.
    fn word(&self, address: usize) -> u32 {
        u32::from_le_bytes(std::array::from_fn(|i| {
            file_offset(self.segments, address + i).map_or(0, |at| self.binary[at])
        }))
    }

    /// How many bytes the segments hold in all: a bound on what a marker can list.
    fn held(&self) -> usize {
        self.segments.iter().map(|s| s.bytes.len()).sum()
    }
}

/// Where the byte at memory `address` is in the binary, if a segment holds it.
fn file_offset(segments: &[Segment], address: usize) -> Option<usize> {
    let i = segments
        .partition_point(|s| s.address <= address)
        .checked_sub(1)?;
    let s = &segments[i];
    (address < s.address + s.bytes.len()).then(|| s.bytes.start + address - s.address)
}

/// Every position of `needle` in `haystack`.
fn find_all<'a>(haystack: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| *w == needle)
        .map(|(i, _)| i)
}

impl Marker {
    /// The marker whose magic ends at memory address `after`, if what follows is one.
    fn read(memory: &Memory<'_>, after: usize) -> Option<Marker> {
        let word = |i: usize| memory.word(after + i * 4);
        let (version, count, n) = (word(0), word(1), word(2) as usize);
        if version != VERSION || n > memory.held() / 4 {
            return None;
        }
        let words: Vec<u32> = (0..3 + n).map(word).collect();
        let body: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        if word(3 + n) != crc32fast::hash(&body) {
            return None;
        }
        Some(Marker {
            count,
            addresses: words[3..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker for `addresses`, as the SDK lays it out.
    fn marker(count: u32, addresses: &[u32]) -> Vec<u8> {
        let mut body = Vec::new();
        for w in [VERSION, count, addresses.len() as u32]
            .iter()
            .chain(addresses)
        {
            body.extend(w.to_le_bytes());
        }
        let mut m = MAGIC.to_vec();
        m.extend(&body);
        m.extend(crc32fast::hash(&body).to_le_bytes());
        m
    }

    /// A core module with one memory and a data segment per `(address, bytes)`.
    fn module(segments: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let data: String = segments
            .iter()
            .map(|(at, bytes)| {
                let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
                format!("(data (i32.const {at}) \"{escaped}\")\n")
            })
            .collect();
        wat::parse_str(format!("(module (memory 1)\n{data})")).expect("valid module")
    }

    fn word_at(binary: &[u8], segments: &[Segment], address: usize) -> u32 {
        let bytes: Vec<u8> = (address..address + 4)
            .map(|a| binary[file_offset(segments, a).expect("held")])
            .collect();
        u32::from_le_bytes(bytes.try_into().unwrap())
    }

    #[test]
    fn marked_objects_get_the_count_and_nothing_else_changes() {
        // Three "objects" at 16, 24 and 64 (counts 1, 7, already immortal), one at 4096 that no
        // segment holds, the marker at 1024.
        let objects = [1u32, 0x0001_0000, 7, 0x0002_0000];
        let mut first = Vec::new();
        for w in objects {
            first.extend(w.to_le_bytes());
        }
        let mut third = (0x5000_0000u32).to_le_bytes().to_vec();
        third.extend([9, 9, 9, 9]);
        let mut binary = module(&[
            (16, first.clone()),
            (64, third),
            (1024, marker(5 << 28, &[16, 24, 64, 4096])),
        ]);
        let before = binary.clone();
        let done = immortalize(&mut binary).unwrap().expect("a marker");
        assert_eq!(
            done,
            Immortalized {
                objects: 2,
                already: 1,
                unheld: 1
            }
        );
        let segments = modules(&binary).unwrap().remove(0);
        assert_eq!(word_at(&binary, &segments, 16), 5 << 28);
        assert_eq!(word_at(&binary, &segments, 20), 0x0001_0000);
        assert_eq!(word_at(&binary, &segments, 24), 5 << 28);
        assert_eq!(word_at(&binary, &segments, 64), 0x5000_0000);
        let changed = before.iter().zip(&binary).filter(|(a, b)| a != b).count();
        assert!(
            changed <= 8,
            "only the two counts' bytes change, {changed} did"
        );
        assert_eq!(before.len(), binary.len());
        wasmparser::Validator::new()
            .validate_all(&binary)
            .expect("still valid");
    }

    #[test]
    fn no_marker_or_a_corrupt_one_changes_nothing() {
        let mut plain = module(&[(16, vec![1, 0, 0, 0])]);
        let before = plain.clone();
        assert_eq!(immortalize(&mut plain).unwrap(), None);
        assert_eq!(plain, before);

        let mut corrupt = marker(5 << 28, &[16]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1; // the checksum no longer matches
        let mut binary = module(&[(16, vec![1, 0, 0, 0]), (1024, corrupt)]);
        let before = binary.clone();
        assert_eq!(immortalize(&mut binary).unwrap(), None);
        assert_eq!(binary, before);

        // A count of addresses larger than what follows is no marker either.
        let mut short = MAGIC.to_vec();
        for w in [VERSION, 5 << 28, u32::MAX] {
            short.extend(w.to_le_bytes());
        }
        let mut binary = module(&[(1024, short)]);
        assert_eq!(immortalize(&mut binary).unwrap(), None);
    }

    #[test]
    fn two_markers_are_refused() {
        let m = marker(5 << 28, &[16]);
        let mut binary = module(&[(16, vec![1, 0, 0, 0]), (1024, m.clone()), (2048, m)]);
        let err = immortalize(&mut binary).unwrap_err();
        assert!(err.contains("more than one"), "{err}");
    }

    #[test]
    fn a_word_split_across_segments_is_written_in_both() {
        // The object's count (3) starts two bytes before the end of one segment.
        let mut binary = module(&[
            (10, vec![0xaa, 0xaa, 3, 0]),
            (14, vec![0, 0, 0xbb]),
            (1024, marker(5 << 28, &[12])),
        ]);
        let done = immortalize(&mut binary).unwrap().unwrap();
        assert_eq!(done.objects, 1);
        let segments = modules(&binary).unwrap().remove(0);
        assert_eq!(word_at(&binary, &segments, 12), 5 << 28);
        assert_eq!(word_at(&binary, &segments, 10) & 0xffff, 0xaaaa);
    }
}
