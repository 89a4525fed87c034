//! Terraform's msgpack encoding of values (the `msgpack` field of DynamicValue).
//!
//! Unknown values are msgpack extension 0 (extension 12, an unknown with refinements, is
//! read as plain unknown). Numbers are written as integers or floats when exact, else as
//! decimal strings. Dynamically typed values are a two-element array: JSON type, value.

use std::collections::BTreeMap;

use rmp::Marker;

use crate::value::{path_join, CodecError, Number, Type, Value};

const UNKNOWN_EXT: i8 = 0;
const UNKNOWN_REFINED_EXT: i8 = 12;

/// Encodes `value` as a value of type `ty`.
pub fn encode(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value, ty, "")?;
    Ok(out)
}

/// Decodes bytes holding a value of type `ty`.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    let mut reader = Reader { buf: bytes, pos: 0 };
    let value = reader.read_value(ty, "")?;
    if reader.pos != bytes.len() {
        return Err(CodecError::new(format!(
            "{} trailing bytes after the value",
            bytes.len() - reader.pos
        )));
    }
    Ok(value)
}

fn io(e: impl std::fmt::Display) -> CodecError {
    CodecError::new(format!("msgpack write failed: {e}"))
}

fn mismatch(path: &str, value: &Value, ty: &Type) -> CodecError {
    let what = match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::List(_) => "list",
        Value::Set(_) => "set",
        Value::Map(_) => "map",
        Value::Object(_) => "object",
        Value::Tuple(_) => "tuple",
        Value::Dynamic(..) => "dynamic value",
        Value::Null | Value::Unknown => "null",
    };
    let at = if path.is_empty() {
        "value".to_string()
    } else {
        path.to_string()
    };
    CodecError::new(format!("{at}: a {what} cannot be encoded as {ty}"))
}

fn write_value(out: &mut Vec<u8>, value: &Value, ty: &Type, path: &str) -> Result<(), CodecError> {
    if *ty == Type::Dynamic {
        return match value {
            Value::Unknown => write_unknown(out),
            Value::Null => rmp::encode::write_nil(out).map_err(io),
            Value::Dynamic(inner_ty, inner) => {
                rmp::encode::write_array_len(out, 2).map_err(io)?;
                rmp::encode::write_bin(out, &inner_ty.to_json_bytes()).map_err(io)?;
                write_value(out, inner, inner_ty, path)
            }
            other => {
                let inferred = infer_type(other);
                rmp::encode::write_array_len(out, 2).map_err(io)?;
                rmp::encode::write_bin(out, &inferred.to_json_bytes()).map_err(io)?;
                write_value(out, other, &inferred, path)
            }
        };
    }
    match (value, ty) {
        (Value::Unknown, _) => write_unknown(out),
        (Value::Null, _) => rmp::encode::write_nil(out).map_err(io),
        (Value::Dynamic(_, inner), _) => write_value(out, inner, ty, path),
        (Value::Bool(b), Type::Bool) => rmp::encode::write_bool(out, *b).map_err(io),
        (Value::Number(n), Type::Number) => write_number(out, n),
        (Value::String(s), Type::String) => rmp::encode::write_str(out, s).map_err(io),
        (Value::List(elems) | Value::Set(elems), Type::List(et) | Type::Set(et)) => {
            rmp::encode::write_array_len(out, len32(elems.len())?).map_err(io)?;
            for (i, e) in elems.iter().enumerate() {
                write_value(out, e, et, &path_join(path, &format!("[{i}]")))?;
            }
            Ok(())
        }
        (Value::Map(m) | Value::Object(m), Type::Map(et)) => {
            rmp::encode::write_map_len(out, len32(m.len())?).map_err(io)?;
            for (k, v) in m {
                rmp::encode::write_str(out, k).map_err(io)?;
                write_value(out, v, et, &path_join(path, &format!("[{k:?}]")))?;
            }
            Ok(())
        }
        (Value::Object(m) | Value::Map(m), Type::Object(attrs)) => {
            if let Some(extra) = m.keys().find(|k| !attrs.contains_key(*k)) {
                return Err(CodecError::new(format!(
                    "{}: unsupported attribute {extra:?}",
                    if path.is_empty() { "object" } else { path }
                )));
            }
            rmp::encode::write_map_len(out, len32(attrs.len())?).map_err(io)?;
            for (k, at) in attrs {
                rmp::encode::write_str(out, k).map_err(io)?;
                let v = m.get(k).unwrap_or(&Value::Null);
                write_value(out, v, at, &path_join(path, k))?;
            }
            Ok(())
        }
        (Value::Tuple(elems) | Value::List(elems), Type::Tuple(types)) if elems.len() == types.len() => {
            rmp::encode::write_array_len(out, len32(elems.len())?).map_err(io)?;
            for (i, (e, et)) in elems.iter().zip(types).enumerate() {
                write_value(out, e, et, &path_join(path, &format!("[{i}]")))?;
            }
            Ok(())
        }
        (v, t) => Err(mismatch(path, v, t)),
    }
}

fn len32(n: usize) -> Result<u32, CodecError> {
    u32::try_from(n).map_err(|_| CodecError::new("collection too large for msgpack"))
}

fn write_unknown(out: &mut Vec<u8>) -> Result<(), CodecError> {
    rmp::encode::write_ext_meta(out, 1, UNKNOWN_EXT).map_err(io)?;
    out.push(0);
    Ok(())
}

fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), CodecError> {
    if let Some(i) = n.as_i64() {
        rmp::encode::write_sint(out, i).map_err(io)?;
    } else if let Some(u) = n.as_u64() {
        rmp::encode::write_uint(out, u).map_err(io)?;
    } else if let Some(f) = n.as_exact_f64() {
        rmp::encode::write_f64(out, f).map_err(io)?;
    } else {
        rmp::encode::write_str(out, n.as_str()).map_err(io)?;
    }
    Ok(())
}

/// The type a value would have on its own (used when a dynamic slot gets a plain value).
pub fn infer_type(value: &Value) -> Type {
    match value {
        Value::Unknown | Value::Null => Type::Dynamic,
        Value::Bool(_) => Type::Bool,
        Value::Number(_) => Type::Number,
        Value::String(_) => Type::String,
        Value::List(v) => Type::list(v.first().map(infer_type).unwrap_or(Type::Dynamic)),
        Value::Set(v) => Type::set(v.first().map(infer_type).unwrap_or(Type::Dynamic)),
        Value::Map(m) => Type::map(m.values().next().map(infer_type).unwrap_or(Type::Dynamic)),
        Value::Object(m) => Type::Object(m.iter().map(|(k, v)| (k.clone(), infer_type(v))).collect()),
        Value::Tuple(v) => Type::Tuple(v.iter().map(infer_type).collect()),
        Value::Dynamic(t, _) => t.clone(),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, path: &str, what: &str) -> CodecError {
        let at = if path.is_empty() { "value" } else { path };
        CodecError::new(format!("{at}: {what} (at byte {})", self.pos))
    }

    fn take(&mut self, n: usize, path: &str) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(path, "unexpected end of msgpack data")),
        }
    }

    fn be(&mut self, n: usize, path: &str) -> Result<u64, CodecError> {
        Ok(self
            .take(n, path)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn marker(&mut self, path: &str) -> Result<Marker, CodecError> {
        let b = self.take(1, path)?[0];
        Ok(Marker::from_u8(b))
    }

    fn peek_marker(&self) -> Option<Marker> {
        self.buf.get(self.pos).map(|b| Marker::from_u8(*b))
    }

    /// Reads an extension's payload once its marker is known; returns (type, data).
    fn ext(&mut self, marker: Marker, path: &str) -> Result<Option<(i8, &'a [u8])>, CodecError> {
        let len = match marker {
            Marker::FixExt1 => 1,
            Marker::FixExt2 => 2,
            Marker::FixExt4 => 4,
            Marker::FixExt8 => 8,
            Marker::FixExt16 => 16,
            Marker::Ext8 => self.be(1, path)? as usize,
            Marker::Ext16 => self.be(2, path)? as usize,
            Marker::Ext32 => self.be(4, path)? as usize,
            _ => return Ok(None),
        };
        let ty = self.take(1, path)?[0] as i8;
        let data = self.take(len, path)?;
        Ok(Some((ty, data)))
    }

    fn str_len(&mut self, marker: Marker, path: &str) -> Result<Option<usize>, CodecError> {
        Ok(Some(match marker {
            Marker::FixStr(n) => n as usize,
            Marker::Str8 | Marker::Bin8 => self.be(1, path)? as usize,
            Marker::Str16 | Marker::Bin16 => self.be(2, path)? as usize,
            Marker::Str32 | Marker::Bin32 => self.be(4, path)? as usize,
            _ => return Ok(None),
        }))
    }

    fn read_string_with(&mut self, marker: Marker, path: &str) -> Result<Option<String>, CodecError> {
        match self.str_len(marker, path)? {
            Some(n) => {
                let bytes = self.take(n, path)?;
                let s = std::str::from_utf8(bytes).map_err(|_| self.err(path, "string is not UTF-8"))?;
                Ok(Some(s.to_string()))
            }
            None => Ok(None),
        }
    }

    fn array_len(&mut self, marker: Marker, path: &str) -> Result<Option<usize>, CodecError> {
        Ok(Some(match marker {
            Marker::FixArray(n) => n as usize,
            Marker::Array16 => self.be(2, path)? as usize,
            Marker::Array32 => self.be(4, path)? as usize,
            _ => return Ok(None),
        }))
    }

    fn map_len(&mut self, marker: Marker, path: &str) -> Result<Option<usize>, CodecError> {
        Ok(Some(match marker {
            Marker::FixMap(n) => n as usize,
            Marker::Map16 => self.be(2, path)? as usize,
            Marker::Map32 => self.be(4, path)? as usize,
            _ => return Ok(None),
        }))
    }

    fn number_with(&mut self, marker: Marker, path: &str) -> Result<Option<Number>, CodecError> {
        Ok(Some(match marker {
            Marker::FixPos(n) => Number::from_u64(u64::from(n)),
            Marker::FixNeg(n) => Number::from_i64(i64::from(n)),
            Marker::U8 => Number::from_u64(self.be(1, path)?),
            Marker::U16 => Number::from_u64(self.be(2, path)?),
            Marker::U32 => Number::from_u64(self.be(4, path)?),
            Marker::U64 => Number::from_u64(self.be(8, path)?),
            Marker::I8 => Number::from_i64(i64::from(self.be(1, path)? as u8 as i8)),
            Marker::I16 => Number::from_i64(i64::from(self.be(2, path)? as u16 as i16)),
            Marker::I32 => Number::from_i64(i64::from(self.be(4, path)? as u32 as i32)),
            Marker::I64 => Number::from_i64(self.be(8, path)? as i64),
            Marker::F32 => Number::from_f64(f64::from(f32::from_bits(self.be(4, path)? as u32)))
                .map_err(|e| self.err(path, &e.message))?,
            Marker::F64 => {
                Number::from_f64(f64::from_bits(self.be(8, path)?)).map_err(|e| self.err(path, &e.message))?
            }
            m => match self.read_string_with(m, path)? {
                Some(s) => Number::parse(&s).map_err(|e| self.err(path, &e.message))?,
                None => return Ok(None),
            },
        }))
    }

    fn read_value(&mut self, ty: &Type, path: &str) -> Result<Value, CodecError> {
        let marker = self.marker(path)?;
        if marker == Marker::Null {
            return Ok(Value::Null);
        }
        if let Some((ext, _)) = self.ext(marker, path)? {
            return match ext {
                UNKNOWN_EXT | UNKNOWN_REFINED_EXT => Ok(Value::Unknown),
                other => Err(self.err(path, &format!("unexpected msgpack extension type {other}"))),
            };
        }
        match ty {
            Type::Dynamic => self.read_dynamic(marker, path),
            Type::Bool => match marker {
                Marker::True => Ok(Value::Bool(true)),
                Marker::False => Ok(Value::Bool(false)),
                _ => Err(self.err(path, "expected a bool")),
            },
            Type::Number => match self.number_with(marker, path)? {
                Some(n) => Ok(Value::Number(n)),
                None => Err(self.err(path, "expected a number")),
            },
            Type::String => match self.read_string_with(marker, path)? {
                Some(s) => Ok(Value::String(s)),
                None => Err(self.err(path, "expected a string")),
            },
            Type::List(et) => Ok(Value::List(self.read_elements(marker, et, path)?)),
            Type::Set(et) => Ok(Value::set(self.read_elements(marker, et, path)?)),
            Type::Tuple(types) => self.read_tuple(marker, types, path),
            Type::Map(et) => self.read_map(marker, et, path),
            Type::Object(attrs) => self.read_object(marker, attrs, path),
        }
    }

    /// A dynamic value: a `[type JSON, value]` pair.
    fn read_dynamic(&mut self, marker: Marker, path: &str) -> Result<Value, CodecError> {
        if self.array_len(marker, path)? != Some(2) {
            return Err(self.err(path, "dynamic value must be a [type, value] pair"));
        }
        let tm = self.marker(path)?;
        let type_json = match self.str_len(tm, path)? {
            Some(n) => self.take(n, path)?,
            None => return Err(self.err(path, "dynamic value type must be JSON bytes")),
        };
        let inner_ty = Type::from_json_bytes(type_json).map_err(|e| self.err(path, &e.message))?;
        let inner = self.read_value(&inner_ty, path)?;
        Ok(Value::Dynamic(inner_ty, Box::new(inner)))
    }

    /// The elements of a list or a set, each of type `et`.
    fn read_elements(&mut self, marker: Marker, et: &Type, path: &str) -> Result<Vec<Value>, CodecError> {
        let n = self
            .array_len(marker, path)?
            .ok_or_else(|| self.err(path, "expected an array"))?;
        let mut elems = Vec::with_capacity(n.min(4096));
        for i in 0..n {
            elems.push(self.read_value(et, &path_join(path, &format!("[{i}]")))?);
        }
        Ok(elems)
    }

    fn read_tuple(&mut self, marker: Marker, types: &[Type], path: &str) -> Result<Value, CodecError> {
        let n = self
            .array_len(marker, path)?
            .ok_or_else(|| self.err(path, "expected an array"))?;
        if n != types.len() {
            return Err(self.err(path, &format!("tuple has {n} elements, want {}", types.len())));
        }
        let mut elems = Vec::with_capacity(n);
        for (i, et) in types.iter().enumerate() {
            elems.push(self.read_value(et, &path_join(path, &format!("[{i}]")))?);
        }
        Ok(Value::Tuple(elems))
    }

    fn read_map(&mut self, marker: Marker, et: &Type, path: &str) -> Result<Value, CodecError> {
        let n = self
            .map_len(marker, path)?
            .ok_or_else(|| self.err(path, "expected a map"))?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let km = self.marker(path)?;
            let k = self
                .read_string_with(km, path)?
                .ok_or_else(|| self.err(path, "map key must be a string"))?;
            let v = self.read_value(et, &path_join(path, &format!("[{k:?}]")))?;
            m.insert(k, v);
        }
        Ok(Value::Map(m))
    }

    /// An object: the attributes sent, and null for each of `attrs` that was not.
    fn read_object(&mut self, marker: Marker, attrs: &BTreeMap<String, Type>, path: &str) -> Result<Value, CodecError> {
        let n = self
            .map_len(marker, path)?
            .ok_or_else(|| self.err(path, "expected an object"))?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let km = self.marker(path)?;
            let k = self
                .read_string_with(km, path)?
                .ok_or_else(|| self.err(path, "attribute name must be a string"))?;
            let at = attrs
                .get(&k)
                .ok_or_else(|| self.err(path, &format!("unsupported attribute {k:?}")))?;
            let v = self.read_value(at, &path_join(path, &k))?;
            m.insert(k, v);
        }
        for k in attrs.keys() {
            m.entry(k.clone()).or_insert(Value::Null);
        }
        Ok(Value::Object(m))
    }
}

/// True when the next value in `bytes` is msgpack nil (used to spot an absent DynamicValue).
pub fn is_nil(bytes: &[u8]) -> bool {
    let r = Reader { buf: bytes, pos: 0 };
    matches!(r.peek_marker(), Some(Marker::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    // Golden bytes, worked out by hand from the msgpack spec and Terraform's encoding rules.
    #[test]
    fn golden_scalars() {
        let cases: Vec<(Value, Type, &str)> = vec![
            (Value::Null, Type::String, "c0"),
            (Value::Unknown, Type::String, "d40000"),
            (Value::Bool(true), Type::Bool, "c3"),
            (Value::int(5), Type::Number, "05"),
            (Value::int(-1), Type::Number, "ff"),
            (Value::int(300), Type::Number, "cd012c"),
            (Value::int(-200), Type::Number, "d1ff38"),
            (
                Value::Number(Number::parse("0.5").expect("n")),
                Type::Number,
                "cb3fe0000000000000",
            ),
            (
                Value::Number(Number::parse("0.1").expect("n")),
                Type::Number,
                "a3302e31",
            ),
            (Value::string("hi"), Type::String, "a26869"),
        ];
        for (v, t, want) in cases {
            let got = encode(&v, &t).expect("encode");
            assert_eq!(hex(&got), want, "{v:?}");
            assert_eq!(decode(&got, &t).expect("decode"), v, "{want}");
        }
    }

    #[test]
    fn big_integers_keep_every_digit() {
        let big = Number::parse("18446744073709551616123").expect("n");
        let bytes = encode(&Value::Number(big.clone()), &Type::Number).expect("encode");
        assert_eq!(decode(&bytes, &Type::Number), Ok(Value::Number(big)));
        let max_u = Value::Number(Number::from_u64(u64::MAX));
        let bytes = encode(&max_u, &Type::Number).expect("encode");
        assert_eq!(hex(&bytes), "cfffffffffffffffff");
        assert_eq!(decode(&bytes, &Type::Number), Ok(max_u));
    }

    #[test]
    fn golden_object_with_collections() {
        let ty = Type::Object(BTreeMap::from([
            ("id".to_string(), Type::String),
            ("tags".to_string(), Type::map(Type::String)),
            ("ids".to_string(), Type::set(Type::String)),
        ]));
        let v = obj(&[
            ("id", Value::Unknown),
            (
                "tags",
                Value::Map(BTreeMap::from([("a".to_string(), Value::string("b"))])),
            ),
            ("ids", Value::set(vec![Value::string("x")])),
        ]);
        let bytes = encode(&v, &ty).expect("encode");
        // map of 3, keys in sorted order: id, ids, tags
        assert_eq!(
            hex(&bytes),
            "83a26964d40000a3696473 91a178a47461677381a161a162".replace(' ', "")
        );
        assert_eq!(decode(&bytes, &ty), Ok(v));
    }

    #[test]
    fn dynamic_values_carry_their_type() {
        let v = Value::Dynamic(
            Type::list(Type::String),
            Box::new(Value::List(vec![Value::string("a")])),
        );
        let bytes = encode(&v, &Type::Dynamic).expect("encode");
        assert_eq!(hex(&bytes[..2]), "92c4");
        assert_eq!(decode(&bytes, &Type::Dynamic), Ok(v));
        // A plain value in a dynamic slot gets its inferred type.
        let bytes = encode(&Value::Bool(true), &Type::Dynamic).expect("encode");
        assert_eq!(
            decode(&bytes, &Type::Dynamic),
            Ok(Value::Dynamic(Type::Bool, Box::new(Value::Bool(true))))
        );
        assert_eq!(
            decode(&encode(&Value::Null, &Type::Dynamic).expect("e"), &Type::Dynamic),
            Ok(Value::Null)
        );
    }

    #[test]
    fn refined_unknowns_decode_as_unknown() {
        // ext 12 with a one-entry map payload {1: true} (a "not null" refinement)
        let bytes = [0xc7, 0x03, 0x0c, 0x81, 0x01, 0xc3];
        assert_eq!(decode(&bytes, &Type::String), Ok(Value::Unknown));
    }

    #[test]
    fn missing_object_attributes_decode_as_null_and_unknown_ones_fail() {
        let ty = Type::Object(BTreeMap::from([
            ("a".to_string(), Type::String),
            ("b".to_string(), Type::Bool),
        ]));
        let bytes = [0x81, 0xa1, b'a', 0xa1, b'x'];
        assert_eq!(
            decode(&bytes, &ty),
            Ok(obj(&[("a", Value::string("x")), ("b", Value::Null)]))
        );
        let bad = [0x81, 0xa1, b'z', 0xc0];
        let err = decode(&bad, &ty).expect_err("unknown attribute");
        assert!(err.message.contains("unsupported attribute \"z\""), "{err}");
    }

    #[test]
    fn type_mismatch_names_the_path() {
        let ty = Type::Object(BTreeMap::from([("n".to_string(), Type::Number)]));
        let err = encode(&obj(&[("n", Value::string("x"))]), &ty).expect_err("mismatch");
        assert!(
            err.message.starts_with("n: a string cannot be encoded as \"number\""),
            "{err}"
        );
        let err = decode(&[0x81, 0xa1, b'n', 0xa1, b'x'], &ty).expect_err("bad number");
        assert!(err.message.starts_with("n: "), "{err}");
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert!(decode(&[0x92, 0x01], &Type::list(Type::Number)).is_err());
        assert!(decode(&[0x01, 0x02], &Type::Number).is_err());
    }
}
