//! Reading Terraform values into plain Rust values and back. Unknown and null both read as
//! `None`; callers that must tell them apart check [`Value::is_unknown`] first.

use std::collections::BTreeMap;

use tfplugin::{AttributePath, Value};

pub fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

pub fn int(v: &Value) -> Option<i64> {
    v.as_i64()
}

pub fn boolean(v: &Value) -> Option<bool> {
    v.as_bool()
}

/// A list or set of strings; None when null or unknown (or when any element is unknown).
pub fn strings(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::List(e) | Value::Set(e) => e.iter().map(|x| x.as_str().map(str::to_string)).collect(),
        _ => None,
    }
}

/// A map of strings as sorted pairs; None when null or unknown.
pub fn pairs(v: &Value) -> Option<Vec<(String, String)>> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, x)| x.as_str().map(|s| (k.clone(), s.to_string())))
            .collect(),
        _ => None,
    }
}

/// The tags of `all` that the provider's `default_tags` do not give (a resource's own `tags`).
pub fn user_tags(all: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    all.iter()
        .filter(|(k, v)| defaults.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub fn of_string(s: Option<impl Into<String>>) -> Value {
    s.map(|s| Value::String(s.into())).unwrap_or(Value::Null)
}

pub fn of_int(i: Option<i64>) -> Value {
    i.map(Value::int).unwrap_or(Value::Null)
}

pub fn of_list(items: Option<&[String]>) -> Value {
    items
        .map(|l| Value::List(l.iter().map(Value::string).collect()))
        .unwrap_or(Value::Null)
}

pub fn of_set(items: Option<&[String]>) -> Value {
    items
        .map(|l| Value::set(l.iter().map(Value::string).collect()))
        .unwrap_or(Value::Null)
}

pub fn of_map(pairs: &[(String, String)]) -> Value {
    Value::Map(
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::string(v)))
            .collect::<BTreeMap<_, _>>(),
    )
}

pub fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A rules-module path (`["data_repository", "1", "file_system_path"]`) as an attribute path.
/// Segments under a map attribute are map keys.
pub fn path(segments: &[String], map_attrs: &[&str]) -> AttributePath {
    let mut p = AttributePath::default();
    let mut in_map = false;
    for s in segments {
        p = if in_map {
            p.key(s)
        } else if let Ok(i) = s.parse::<usize>() {
            p.index(i)
        } else {
            p.attr(s)
        };
        in_map = map_attrs.contains(&s.as_str());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_collections() {
        let l = Value::List(vec![Value::string("a"), Value::string("b")]);
        assert_eq!(strings(&l), Some(vec!["a".into(), "b".into()]));
        assert_eq!(strings(&Value::List(vec![Value::Unknown])), None);
        assert_eq!(strings(&Value::Unknown), None);
        let m = of_map(&[("k".into(), "v".into())]);
        assert_eq!(pairs(&m), Some(vec![("k".to_string(), "v".to_string())]));
    }

    #[test]
    fn rule_paths_become_attribute_paths() {
        let p = path(
            &["data_repository".into(), "1".into(), "data_repository_path".into()],
            &[],
        );
        assert_eq!(p.to_string(), "data_repository[1].data_repository_path");
        let p = path(&["tags".into(), "Name".into()], &["tags"]);
        assert_eq!(p.to_string(), "tags[\"Name\"]");
    }
}
