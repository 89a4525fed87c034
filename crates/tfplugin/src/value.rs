//! Terraform values and types (cty), with exact numbers.
//!
//! A [`Value`] is what Terraform sends and receives: known values of every cty kind, plus
//! `Unknown` (known only after apply) and `Null`. Numbers are kept as canonical decimal
//! text so integers beyond 64 bits and decimals travel without losing precision.

use std::collections::BTreeMap;
use std::fmt;

/// A cty type, as Terraform describes it in JSON (`"string"`, `["list","number"]`, ...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Type {
    Bool,
    Number,
    String,
    /// The dynamic pseudo-type: any value, whose type travels with it.
    Dynamic,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Object(BTreeMap<String, Type>),
    Tuple(Vec<Type>),
}

impl Type {
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }
    pub fn set(t: Type) -> Type {
        Type::Set(Box::new(t))
    }
    pub fn map(t: Type) -> Type {
        Type::Map(Box::new(t))
    }

    /// The JSON form Terraform uses in schemas and in dynamic values.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Type::Bool => J::from("bool"),
            Type::Number => J::from("number"),
            Type::String => J::from("string"),
            Type::Dynamic => J::from("dynamic"),
            Type::List(t) => J::Array(vec![J::from("list"), t.to_json()]),
            Type::Set(t) => J::Array(vec![J::from("set"), t.to_json()]),
            Type::Map(t) => J::Array(vec![J::from("map"), t.to_json()]),
            Type::Object(attrs) => J::Array(vec![
                J::from("object"),
                J::Object(attrs.iter().map(|(k, t)| (k.clone(), t.to_json())).collect()),
            ]),
            Type::Tuple(elems) => J::Array(vec![
                J::from("tuple"),
                J::Array(elems.iter().map(Type::to_json).collect()),
            ]),
        }
    }

    pub fn to_json_bytes(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }

    /// Parses Terraform's JSON type notation. Optional-attribute markers on object types
    /// (a third array element) are accepted and ignored: they only matter to Terraform.
    pub fn from_json(json: &serde_json::Value) -> Result<Type, CodecError> {
        use serde_json::Value as J;
        let bad = || CodecError::new(format!("invalid type description {json}"));
        match json {
            J::String(s) => match s.as_str() {
                "bool" => Ok(Type::Bool),
                "number" => Ok(Type::Number),
                "string" => Ok(Type::String),
                "dynamic" => Ok(Type::Dynamic),
                _ => Err(bad()),
            },
            J::Array(parts) => {
                let kind = parts.first().and_then(J::as_str).ok_or_else(bad)?;
                let arg = parts.get(1).ok_or_else(bad)?;
                match kind {
                    "list" => Ok(Type::list(Type::from_json(arg)?)),
                    "set" => Ok(Type::set(Type::from_json(arg)?)),
                    "map" => Ok(Type::map(Type::from_json(arg)?)),
                    "object" => {
                        let attrs = arg.as_object().ok_or_else(bad)?;
                        let mut out = BTreeMap::new();
                        for (k, v) in attrs {
                            out.insert(k.clone(), Type::from_json(v)?);
                        }
                        Ok(Type::Object(out))
                    }
                    "tuple" => {
                        let elems = arg.as_array().ok_or_else(bad)?;
                        Ok(Type::Tuple(
                            elems.iter().map(Type::from_json).collect::<Result<_, _>>()?,
                        ))
                    }
                    _ => Err(bad()),
                }
            }
            _ => Err(bad()),
        }
    }

    pub fn from_json_bytes(bytes: &[u8]) -> Result<Type, CodecError> {
        let json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| CodecError::new(format!("type is not JSON: {e}")))?;
        Type::from_json(&json)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// An exact number in canonical decimal form: no exponent, no leading zeros, no trailing
/// fractional zeros, no `-0`. `"18446744073709551617"` and `"0.1"` are kept as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Number(String);

impl Number {
    /// Parses decimal text, with optional sign, fraction and exponent (`1.5e3`).
    pub fn parse(text: &str) -> Result<Number, CodecError> {
        let bad = || CodecError::new(format!("{text:?} is not a number"));
        let t = text.trim();
        let (negative, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (mantissa, exponent) = match t.find(['e', 'E']) {
            Some(i) => {
                let exp: i64 = t[i + 1..].parse().map_err(|_| bad())?;
                (&t[..i], exp)
            }
            None => (t, 0),
        };
        let (int_part, frac_part) = match mantissa.split_once('.') {
            Some((i, f)) => (i, f),
            None => (mantissa, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(bad());
        }
        if !int_part.bytes().chain(frac_part.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if exponent.unsigned_abs() > 10_000 {
            return Err(CodecError::new(format!("{text:?}: exponent too large")));
        }
        // All digits, and where the decimal point goes after applying the exponent.
        let digits: String = format!("{int_part}{frac_part}");
        let point = int_part.len() as i64 + exponent;
        let (int_digits, frac_digits) = if point <= 0 {
            (
                String::new(),
                format!("{}{}", "0".repeat(point.unsigned_abs() as usize), digits),
            )
        } else if point as usize >= digits.len() {
            (
                format!("{digits}{}", "0".repeat(point as usize - digits.len())),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_string(),
                digits[point as usize..].to_string(),
            )
        };
        let int_digits = int_digits.trim_start_matches('0');
        let frac_digits = frac_digits.trim_end_matches('0');
        let mut out = String::new();
        if negative && !(int_digits.is_empty() && frac_digits.is_empty()) {
            out.push('-');
        }
        out.push_str(if int_digits.is_empty() { "0" } else { int_digits });
        if !frac_digits.is_empty() {
            out.push('.');
            out.push_str(frac_digits);
        }
        Ok(Number(out))
    }

    pub fn from_i64(v: i64) -> Number {
        Number(v.to_string())
    }

    pub fn from_u64(v: u64) -> Number {
        Number(v.to_string())
    }

    /// The exact decimal value of a finite float (every f64 has a finite decimal expansion).
    pub fn from_f64(v: f64) -> Result<Number, CodecError> {
        if !v.is_finite() {
            return Err(CodecError::new(format!("{v} is not a finite number")));
        }
        Number::parse(&format!("{v:.1100}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }

    /// The nearest float (may round).
    pub fn as_f64(&self) -> f64 {
        self.0.parse().unwrap_or(f64::NAN)
    }

    /// The float with exactly this value, if there is one.
    pub fn as_exact_f64(&self) -> Option<f64> {
        let f: f64 = self.0.parse().ok()?;
        let back = Number::from_f64(f).ok()?;
        (back == *self).then_some(f)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Terraform value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Known only after apply.
    Unknown,
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    /// Elements in a canonical order (see [`Value::set`]), so equal sets compare equal.
    Set(Vec<Value>),
    Map(BTreeMap<String, Value>),
    Object(BTreeMap<String, Value>),
    Tuple(Vec<Value>),
    /// A value in a dynamically typed position, with the concrete type it travels with.
    Dynamic(Type, Box<Value>),
}

impl Value {
    /// A set value, with elements put in canonical order and duplicates removed.
    pub fn set(mut elems: Vec<Value>) -> Value {
        elems.sort_by_cached_key(Value::sort_key);
        elems.dedup();
        Value::Set(elems)
    }

    fn sort_key(&self) -> String {
        format!("{self:?}")
    }

    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn int(v: i64) -> Value {
        Value::Number(Number::from_i64(v))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown)
    }

    /// True when the value and everything inside it is known.
    pub fn is_wholly_known(&self) -> bool {
        match self {
            Value::Unknown => false,
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => v.iter().all(Value::is_wholly_known),
            Value::Map(m) | Value::Object(m) => m.values().all(Value::is_wholly_known),
            Value::Dynamic(_, v) => v.is_wholly_known(),
            _ => true,
        }
    }

    /// The attribute of an object (Null when absent or when self is not an object).
    pub fn attr(&self, name: &str) -> &Value {
        static NULL: Value = Value::Null;
        match self {
            Value::Object(m) => m.get(name).unwrap_or(&NULL),
            Value::Dynamic(_, v) => v.attr(name),
            _ => &NULL,
        }
    }

    pub fn attr_mut(&mut self, name: &str) -> Option<&mut Value> {
        match self {
            Value::Object(m) => m.get_mut(name),
            _ => None,
        }
    }

    pub fn set_attr(&mut self, name: &str, value: Value) {
        if let Value::Object(m) = self {
            m.insert(name.to_string(), value);
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// Elements of a list, set or tuple (empty for anything else).
    pub fn elements(&self) -> &[Value] {
        match self {
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => v,
            _ => &[],
        }
    }

    /// Entries of a map or object (None for anything else).
    pub fn entries(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) | Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// A null value shaped like `ty`: objects get every attribute set to null.
    pub fn null_object(ty: &Type) -> Value {
        match ty {
            Type::Object(attrs) => Value::Object(attrs.keys().map(|k| (k.clone(), Value::Null)).collect()),
            _ => Value::Null,
        }
    }
}

/// A failure to encode or decode a value: the message names the attribute path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CodecError {
    pub message: String,
}

impl CodecError {
    pub fn new(message: impl Into<String>) -> Self {
        CodecError {
            message: message.into(),
        }
    }
}

pub(crate) fn path_join(path: &str, step: &str) -> String {
    if path.is_empty() {
        step.to_string()
    } else if step.starts_with('[') {
        format!("{path}{step}")
    } else {
        format!("{path}.{step}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_canonical_and_exact() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("+12", "12"),
            ("007", "7"),
            ("1.50", "1.5"),
            ("1e3", "1000"),
            ("1.25E-2", "0.0125"),
            ("-0.000", "0"),
            ("18446744073709551617", "18446744073709551617"),
            (
                "123456789012345678901234567890.000000000000000000001",
                "123456789012345678901234567890.000000000000000000001",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                Number::parse(input).map(|n| n.to_string()),
                Ok(want.to_string()),
                "{input}"
            );
        }
        for bad in ["", "-", "1.2.3", "abc", "1e", "0x10", "1e99999"] {
            assert!(Number::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn floats_convert_exactly() {
        assert_eq!(Number::from_f64(0.5).map(|n| n.to_string()), Ok("0.5".into()));
        assert_eq!(
            Number::from_f64(1e20).map(|n| n.to_string()),
            Ok("100000000000000000000".into())
        );
        let tenth = Number::from_f64(0.1).expect("finite");
        assert!(tenth.as_str().starts_with("0.1000000000000000055511151231257827"));
        assert_eq!(Number::parse("0.5").expect("num").as_exact_f64(), Some(0.5));
        assert_eq!(Number::parse("0.1").expect("num").as_exact_f64(), None);
        assert!(Number::from_f64(f64::NAN).is_err());
    }

    #[test]
    fn types_round_trip_through_json() {
        let ty = Type::Object(BTreeMap::from([
            ("a".to_string(), Type::list(Type::String)),
            ("b".to_string(), Type::Tuple(vec![Type::Bool, Type::Dynamic])),
            ("c".to_string(), Type::map(Type::set(Type::Number))),
        ]));
        let json = ty.to_json_bytes();
        assert_eq!(Type::from_json_bytes(&json), Ok(ty));
        let with_optional = br#"["object",{"x":"string"},["x"]]"#;
        assert!(matches!(Type::from_json_bytes(with_optional), Ok(Type::Object(_))));
        assert!(Type::from_json_bytes(br#"["bogus","string"]"#).is_err());
    }

    #[test]
    fn sets_are_order_insensitive() {
        let a = Value::set(vec![Value::string("b"), Value::string("a"), Value::string("a")]);
        let b = Value::set(vec![Value::string("a"), Value::string("b")]);
        assert_eq!(a, b);
        assert_eq!(a.elements().len(), 2);
    }
}
