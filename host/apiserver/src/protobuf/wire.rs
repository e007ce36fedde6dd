//! The protobuf wire format: varints, field keys and length-delimited payloads, split into
//! `(field number, value)` pairs. Fixed-width fields are skipped (no kind decoded here has
//! one), never an error.

use crate::status::{ApiError, ApiResult};

/// A 400 for a body that is not well-formed protobuf.
pub(super) fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("unable to decode protobuf body: {what}"))
}

/// One field's value on the wire.
pub(super) enum Wire<'a> {
    Varint(u64),
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

    fn next(&mut self) -> ApiResult<Option<(u64, Wire<'a>)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (num, ty) = (key >> 3, key & 7);
        let wire = match ty {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if ty == 1 { 8 } else { 4 };
                if self.buf.len() < n {
                    return Err(bad("truncated fixed field"));
                }
                self.buf = &self.buf[n..];
                Wire::Varint(0)
            }
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

/// Standard base64 (JSON's encoding of `bytes` fields).
pub(super) fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}
