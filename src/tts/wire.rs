//! Protobuf wire format, just enough to read ONNX files and append fields to them.
//!
//! Input: the bytes of one message. Output: its top-level fields (number, wire type, where the
//! value lies). Invariant: every returned range lies inside the buffer; nested messages are read by
//! calling [`fields`] again on a field's value. Shared by the CPU path's `graph_patch` and the CUDA
//! backend's ONNX parser (`cuda::onnx`), so it lives outside `cuda`.

use std::ops::Range;

pub const WIRE_VARINT: u64 = 0;
const WIRE_I64: u64 = 1;
pub const WIRE_LEN: u64 = 2;
pub const WIRE_I32: u64 = 5;

/// Why a buffer is not a protobuf message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub &'static str);

/// One top-level field of a message: its number and where its tag and value lie.
#[derive(Debug, Clone)]
pub struct Field {
    pub number: u64,
    pub tag_start: usize,
    /// The payload: for length-delimited fields without the length prefix.
    pub value: Range<usize>,
    pub wire: u64,
}

pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or(WireError("truncated varint"))?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError("varint too long"))
}

pub fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field.
pub fn write_len_field(out: &mut Vec<u8>, number: u64, body: &[u8]) {
    write_varint(out, (number << 3) | WIRE_LEN);
    write_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// Splits a message into its top-level fields.
pub fn fields(buf: &[u8]) -> Result<Vec<Field>, WireError> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let tag_start = pos;
        let tag = read_varint(buf, &mut pos)?;
        let (number, wire) = (tag >> 3, tag & 7);
        let mut value_start = pos;
        match wire {
            WIRE_VARINT => {
                read_varint(buf, &mut pos)?;
            }
            WIRE_I64 => pos = pos.checked_add(8).ok_or(WireError("length overflow"))?,
            WIRE_I32 => pos = pos.checked_add(4).ok_or(WireError("length overflow"))?,
            WIRE_LEN => {
                let len = usize::try_from(read_varint(buf, &mut pos)?)
                    .map_err(|_| WireError("length overflow"))?;
                value_start = pos;
                pos = pos.checked_add(len).ok_or(WireError("length overflow"))?;
            }
            _ => return Err(WireError("unsupported wire type")),
        }
        if pos > buf.len() {
            return Err(WireError("field runs past the end"));
        }
        out.push(Field {
            number,
            tag_start,
            value: value_start..pos,
            wire,
        });
    }
    Ok(out)
}

/// The value of a varint field (the field must be one).
pub fn varint_value(buf: &[u8], f: &Field) -> Result<u64, WireError> {
    let mut p = f.value.start;
    read_varint(buf, &mut p)
}

/// A repeated integer field, packed (one length-delimited run) or not.
pub fn push_ints(buf: &[u8], f: &Field, out: &mut Vec<i64>) -> Result<(), WireError> {
    match f.wire {
        WIRE_VARINT => out.push(varint_value(buf, f)? as i64),
        WIRE_LEN => {
            let body = &buf[f.value.clone()];
            let mut p = 0;
            while p < body.len() {
                out.push(read_varint(body, &mut p)? as i64);
            }
        }
        _ => return Err(WireError("integer field with a wrong wire type")),
    }
    Ok(())
}

/// A repeated float field, packed or not.
pub fn push_floats(buf: &[u8], f: &Field, out: &mut Vec<f32>) -> Result<(), WireError> {
    let body = &buf[f.value.clone()];
    match f.wire {
        WIRE_I32 | WIRE_LEN if body.len().is_multiple_of(4) => {
            out.extend(
                body.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            Ok(())
        }
        _ => Err(WireError("float field with a wrong wire type or size")),
    }
}

/// The value of a 32-bit fixed field as a float.
pub fn float_value(buf: &[u8], f: &Field) -> Result<f32, WireError> {
    let mut v = Vec::with_capacity(1);
    push_floats(buf, f, &mut v)?;
    v.first().copied().ok_or(WireError("empty float field"))
}

/// Every length-delimited field `number` of a message, as text.
pub fn strings(buf: &[u8], number: u64) -> Result<Vec<String>, WireError> {
    Ok(fields(buf)?
        .into_iter()
        .filter(|f| f.number == number && f.wire == WIRE_LEN)
        .map(|f| String::from_utf8_lossy(&buf[f.value]).into_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            write_varint(&mut b, v);
            let mut p = 0;
            assert_eq!(read_varint(&b, &mut p).unwrap(), v);
            assert_eq!(p, b.len());
        }
    }

    #[test]
    fn bad_messages_are_refused() {
        assert_eq!(fields(&[0x80]).unwrap_err(), WireError("truncated varint"));
        assert_eq!(
            fields(&[0xff; 11]).unwrap_err(),
            WireError("varint too long")
        );
        assert_eq!(
            fields(&[0x0b]).unwrap_err(),
            WireError("unsupported wire type")
        );
        assert_eq!(
            fields(&[0x0a, 5, 1]).unwrap_err(),
            WireError("field runs past the end")
        );
        assert_eq!(
            fields(&[0x0d, 1]).unwrap_err(),
            WireError("field runs past the end")
        );
    }

    #[test]
    fn packed_and_unpacked_ints() {
        let mut m = Vec::new();
        write_varint(&mut m, 1 << 3);
        write_varint(&mut m, 5);
        let mut packed = Vec::new();
        write_varint(&mut packed, 7);
        write_varint(&mut packed, 300);
        write_len_field(&mut m, 1, &packed);
        let mut out = Vec::new();
        for f in fields(&m).unwrap() {
            push_ints(&m, &f, &mut out).unwrap();
        }
        assert_eq!(out, [5, 7, 300]);
    }

    #[test]
    fn floats_need_whole_words() {
        let mut m = Vec::new();
        write_len_field(&mut m, 4, &[0, 0, 128, 63, 0, 0]);
        let f = &fields(&m).unwrap()[0];
        assert!(push_floats(&m, f, &mut Vec::new()).is_err());
        let mut ok = Vec::new();
        write_len_field(&mut ok, 4, &1.5f32.to_le_bytes());
        let f = &fields(&ok).unwrap()[0];
        assert_eq!(float_value(&ok, f).unwrap(), 1.5);
    }
}
