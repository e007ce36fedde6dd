//! The protobuf wire format: reading a message into `(field number, value)` pairs, and
//! writing fields. Hand-written, as the format is four rules and the codec above it is driven by
//! the field table rather than by generated types (the protobuf crates expect the latter).

use crate::status::{ApiError, ApiResult};

/// A 400 for a body that is not well-formed protobuf.
pub(super) fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("unable to decode protobuf body: {what}"))
}

/// One field's value on the wire.
pub(super) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(bad("varint too long"))
    }

    fn fixed<const N: usize>(&mut self) -> ApiResult<[u8; N]> {
        let (head, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or_else(|| bad("truncated fixed field"))?;
        self.buf = rest;
        Ok(*head)
    }

    fn next(&mut self) -> ApiResult<Option<(u64, Wire<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (num, ty) = (key >> 3, key & 7);
        let wire = match ty {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(u64::from_le_bytes(self.fixed()?)),
            5 => Wire::Fixed32(u32::from_le_bytes(self.fixed()?)),
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
                if self.buf.len() < len {
                    return Err(bad("truncated length-delimited field"));
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Wire::Bytes(b)
            }
            _ => return Err(bad("unsupported wire type")),
        };
        Ok(Some((num, wire)))
    }
}

/// All fields of one message, in wire order.
pub(super) fn fields(buf: &[u8]) -> ApiResult<Vec<(u64, Wire<'_>)>> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

pub(super) fn string(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("invalid UTF-8"))
}

/// The varints of a packed repeated field.
pub(super) fn packed(buf: &[u8]) -> ApiResult<Vec<u64>> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while !r.buf.is_empty() {
        out.push(r.varint()?);
    }
    Ok(out)
}

/// Appends a varint.
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a varint field (negative integers as their 64-bit two's complement, as Go writes
/// `int32` and `int64`).
pub(super) fn put_int(out: &mut Vec<u8>, number: u64, v: u64) {
    put_varint(out, number << 3);
    put_varint(out, v);
}

/// Appends a length-delimited field.
pub(super) fn put_bytes(out: &mut Vec<u8>, number: u64, payload: &[u8]) {
    put_varint(out, (number << 3) | 2);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a fixed 64-bit field.
pub(super) fn put_fixed64(out: &mut Vec<u8>, number: u64, v: u64) {
    put_varint(out, (number << 3) | 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a fixed 32-bit field.
pub(super) fn put_fixed32(out: &mut Vec<u8>, number: u64, v: u32) {
    put_varint(out, (number << 3) | 5);
    out.extend_from_slice(&v.to_le_bytes());
}
