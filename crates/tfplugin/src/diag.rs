//! Diagnostics: what a user sees when something is wrong, with the attribute it is about.

use std::fmt;

use crate::proto::tfplugin6 as pb;

/// One step of a path into a value: an attribute, a map key or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Attr(String),
    Key(String),
    Index(i64),
}

/// A path to an attribute, e.g. `data_repository[1].data_repository_path`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributePath(pub Vec<Step>);

impl AttributePath {
    pub fn root(name: &str) -> Self {
        AttributePath(vec![Step::Attr(name.to_string())])
    }

    pub fn attr(mut self, name: &str) -> Self {
        self.0.push(Step::Attr(name.to_string()));
        self
    }

    pub fn index(mut self, i: usize) -> Self {
        self.0.push(Step::Index(i as i64));
        self
    }

    pub fn key(mut self, k: &str) -> Self {
        self.0.push(Step::Key(k.to_string()));
        self
    }

    /// A path from plain segments; all-digit segments are list indexes.
    pub fn from_segments<S: AsRef<str>>(segments: &[S]) -> Self {
        AttributePath(
            segments
                .iter()
                .map(|s| match s.as_ref().parse::<i64>() {
                    Ok(i) => Step::Index(i),
                    Err(_) => Step::Attr(s.as_ref().to_string()),
                })
                .collect(),
        )
    }

    pub(crate) fn to_proto(&self) -> pb::AttributePath {
        use pb::attribute_path::step::Selector;
        pb::AttributePath {
            steps: self
                .0
                .iter()
                .map(|s| pb::attribute_path::Step {
                    selector: Some(match s {
                        Step::Attr(a) => Selector::AttributeName(a.clone()),
                        Step::Key(k) => Selector::ElementKeyString(k.clone()),
                        Step::Index(i) => Selector::ElementKeyInt(*i),
                    }),
                })
                .collect(),
        }
    }
}

impl fmt::Display for AttributePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Step::Attr(a) if i == 0 => write!(f, "{a}")?,
                Step::Attr(a) => write!(f, ".{a}")?,
                Step::Key(k) => write!(f, "[{k:?}]")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// A short summary a user can act on, a detail with the cause, and the attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub path: Option<AttributePath>,
}

impl Diagnostic {
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            path: None,
        }
    }

    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            summary: summary.into(),
            detail: detail.into(),
            path: None,
        }
    }

    pub fn at(mut self, path: AttributePath) -> Self {
        self.path = Some(path);
        self
    }

    pub(crate) fn to_proto(&self) -> pb::Diagnostic {
        pb::Diagnostic {
            severity: match self.severity {
                Severity::Error => pb::diagnostic::Severity::Error as i32,
                Severity::Warning => pb::diagnostic::Severity::Warning as i32,
            },
            summary: self.summary.clone(),
            detail: self.detail.clone(),
            attribute: self.path.as_ref().map(AttributePath::to_proto),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{p}: ")?;
        }
        write!(f, "{}", self.summary)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A list of diagnostics, the result of every step that can fail or warn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Diagnostics(Vec::new())
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn error(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.0.push(Diagnostic::error(summary, detail));
    }

    pub fn error_at(&mut self, path: AttributePath, summary: impl Into<String>, detail: impl Into<String>) {
        self.0.push(Diagnostic::error(summary, detail).at(path));
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn to_proto(&self) -> Vec<pb::Diagnostic> {
        self.0.iter().map(Diagnostic::to_proto).collect()
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_terraform() {
        let p = AttributePath::root("data_repository")
            .index(1)
            .attr("data_repository_path");
        assert_eq!(p.to_string(), "data_repository[1].data_repository_path");
        let p = AttributePath::from_segments(&["tags", "Name"]).attr("x");
        assert_eq!(p.to_string(), "tags.Name.x");
        let p = AttributePath::root("tags").key("Name");
        assert_eq!(p.to_string(), "tags[\"Name\"]");
    }

    #[test]
    fn errors_are_detected() {
        let mut d = Diagnostics::new();
        d.push(Diagnostic::warning("w", ""));
        assert!(!d.has_errors());
        d.error_at(AttributePath::root("a"), "bad", "because");
        assert!(d.has_errors());
        assert_eq!(d.0[1].to_proto().attribute.map(|a| a.steps.len()), Some(1));
    }
}
