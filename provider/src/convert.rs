//! What the typed models (`tfplugin::model`) leave over: the user's own tags out of `tags_all`,
//! a rules path as an attribute path, and values built by hand in tests.

use std::collections::BTreeMap;

use tfplugin::AttributePath;
#[cfg(test)]
use tfplugin::Value;

/// The tags of `all` that the provider's `default_tags` do not give (a resource's own `tags`).
pub fn user_tags(all: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    all.iter()
        .filter(|(k, v)| defaults.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A list of strings (null for none): for tests that build values by hand.
#[cfg(test)]
pub fn of_list(items: Option<&[String]>) -> Value {
    items
        .map(|l| Value::List(l.iter().map(Value::string).collect()))
        .unwrap_or(Value::Null)
}

/// An object of `pairs`: for tests that build values by hand.
#[cfg(test)]
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
