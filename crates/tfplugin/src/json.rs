//! Terraform's JSON encoding of values: stored state (UpgradeResourceState's raw state) and
//! the `json` field of DynamicValue. JSON cannot hold unknowns; numbers stay exact.

use std::collections::BTreeMap;

use serde_json::Value as J;

use crate::value::{path_join, CodecError, Number, Type, Value};

/// Decodes JSON holding a value of type `ty`. Object attributes missing from the JSON
/// become null; attributes the type does not have are an error unless `drop_unknown_attrs`
/// is set (stored state from an older schema may carry attributes since removed).
pub fn decode(bytes: &[u8], ty: &Type, drop_unknown_attrs: bool) -> Result<Value, CodecError> {
    let json: J = serde_json::from_slice(bytes).map_err(|e| CodecError::new(format!("invalid JSON: {e}")))?;
    from_json(&json, ty, "", drop_unknown_attrs)
}

fn err(path: &str, what: &str) -> CodecError {
    CodecError::new(format!("{}: {what}", if path.is_empty() { "value" } else { path }))
}

pub fn from_json(json: &J, ty: &Type, path: &str, drop_unknown_attrs: bool) -> Result<Value, CodecError> {
    if json.is_null() {
        return Ok(Value::Null);
    }
    match ty {
        Type::Bool => json
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| err(path, "expected a bool")),
        Type::Number => match json {
            J::Number(n) => Ok(Value::Number(Number::parse(&n.to_string())?)),
            J::String(s) => Ok(Value::Number(Number::parse(s).map_err(|e| err(path, &e.message))?)),
            _ => Err(err(path, "expected a number")),
        },
        Type::String => match json {
            J::String(s) => Ok(Value::String(s.clone())),
            J::Bool(b) => Ok(Value::String(b.to_string())),
            J::Number(n) => Ok(Value::String(n.to_string())),
            _ => Err(err(path, "expected a string")),
        },
        Type::List(et) => Ok(Value::List(elements(json, et, path, drop_unknown_attrs)?)),
        Type::Set(et) => Ok(Value::set(elements(json, et, path, drop_unknown_attrs)?)),
        Type::Tuple(types) => tuple(json, types, path, drop_unknown_attrs),
        Type::Map(et) => {
            let obj = json.as_object().ok_or_else(|| err(path, "expected an object"))?;
            let mut m = BTreeMap::new();
            for (k, v) in obj {
                m.insert(
                    k.clone(),
                    from_json(v, et, &path_join(path, &format!("[{k:?}]")), drop_unknown_attrs)?,
                );
            }
            Ok(Value::Map(m))
        }
        Type::Object(attrs) => object(json, attrs, path, drop_unknown_attrs),
        Type::Dynamic => {
            let obj = json
                .as_object()
                .ok_or_else(|| err(path, "dynamic value must be {\"type\", \"value\"}"))?;
            let inner_ty = Type::from_json(
                obj.get("type")
                    .ok_or_else(|| err(path, "dynamic value without a type"))?,
            )?;
            let inner = from_json(
                obj.get("value").unwrap_or(&J::Null),
                &inner_ty,
                path,
                drop_unknown_attrs,
            )?;
            Ok(Value::Dynamic(inner_ty, Box::new(inner)))
        }
    }
}

/// The elements of a list or set, each of type `et`.
fn elements(json: &J, et: &Type, path: &str, drop_unknown_attrs: bool) -> Result<Vec<Value>, CodecError> {
    let arr = json.as_array().ok_or_else(|| err(path, "expected an array"))?;
    arr.iter()
        .enumerate()
        .map(|(i, e)| from_json(e, et, &path_join(path, &format!("[{i}]")), drop_unknown_attrs))
        .collect()
}

fn tuple(json: &J, types: &[Type], path: &str, drop_unknown_attrs: bool) -> Result<Value, CodecError> {
    let arr = json.as_array().ok_or_else(|| err(path, "expected an array"))?;
    if arr.len() != types.len() {
        return Err(err(
            path,
            &format!("tuple has {} elements, want {}", arr.len(), types.len()),
        ));
    }
    let elems = arr
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (e, t))| from_json(e, t, &path_join(path, &format!("[{i}]")), drop_unknown_attrs))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Tuple(elems))
}

/// An object: its attributes, null for each of `attrs` it lacks; one it has that `attrs` does
/// not is dropped or refused.
fn object(json: &J, attrs: &BTreeMap<String, Type>, path: &str, drop_unknown_attrs: bool) -> Result<Value, CodecError> {
    let obj = json.as_object().ok_or_else(|| err(path, "expected an object"))?;
    let mut m = BTreeMap::new();
    for (k, v) in obj {
        match attrs.get(k) {
            Some(at) => {
                m.insert(k.clone(), from_json(v, at, &path_join(path, k), drop_unknown_attrs)?);
            }
            None if drop_unknown_attrs => {}
            None => return Err(err(path, &format!("unsupported attribute {k:?}"))),
        }
    }
    for k in attrs.keys() {
        m.entry(k.clone()).or_insert(Value::Null);
    }
    Ok(Value::Object(m))
}

/// Encodes a known value as JSON (unknown values are an error).
pub fn to_json(value: &Value) -> Result<J, CodecError> {
    Ok(match value {
        Value::Unknown => return Err(CodecError::new("unknown values cannot be encoded as JSON")),
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Number(n) => serde_json::from_str(n.as_str()).map_err(|e| CodecError::new(e.to_string()))?,
        Value::String(s) => J::String(s.clone()),
        Value::List(v) | Value::Set(v) | Value::Tuple(v) => J::Array(v.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(m) | Value::Object(m) => J::Object(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), to_json(v)?)))
                .collect::<Result<_, CodecError>>()?,
        ),
        Value::Dynamic(t, v) => serde_json::json!({"type": t.to_json(), "value": to_json(v)?}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty() -> Type {
        Type::Object(BTreeMap::from([
            ("id".to_string(), Type::String),
            ("size".to_string(), Type::Number),
            ("subnets".to_string(), Type::list(Type::String)),
        ]))
    }

    #[test]
    fn state_json_decodes_with_exact_numbers() {
        let raw = br#"{"id":"fs-1","size":123456789012345678901234567890,"subnets":["a"]}"#;
        let v = decode(raw, &ty(), false).expect("decode");
        assert_eq!(v.attr("size").as_i64(), None);
        assert_eq!(
            v.attr("size"),
            &Value::Number(Number::parse("123456789012345678901234567890").expect("n"))
        );
        assert_eq!(
            to_json(&v).expect("json").to_string(),
            r#"{"id":"fs-1","size":123456789012345678901234567890,"subnets":["a"]}"#
        );
    }

    #[test]
    fn removed_attributes_are_dropped_only_when_asked() {
        let raw = br#"{"id":"fs-1","old_attr":true}"#;
        assert!(decode(raw, &ty(), false).is_err());
        let v = decode(raw, &ty(), true).expect("decode");
        assert_eq!(v.attr("id").as_str(), Some("fs-1"));
        assert!(v.attr("size").is_null());
    }

    #[test]
    fn unknown_cannot_be_json() {
        assert!(to_json(&Value::Unknown).is_err());
    }
}
