//! The one error type of the model: a problem with one attribute, worded for the user.

use std::fmt;

/// A validation problem, pointing at the attribute it is about.
///
/// The provider turns it into a Terraform diagnostic (summary, detail, attribute path);
/// hpc-node logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// Where the problem is, outermost first, e.g. `["partition", "gpu", "max_time"]`
    /// or `["partition", "gpu", "node_set", "gpu-p1-p548xl", "shape", "gpu_model"]`.
    pub path: Vec<String>,
    /// Short statement a user can act on.
    pub summary: String,
    /// The cause and what to do about it.
    pub detail: String,
}

impl ModelError {
    /// A new error at `path`.
    pub fn new<P, S>(path: P, summary: impl Into<String>, detail: impl Into<String>) -> Self
    where
        P: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ModelError {
            path: path.into_iter().map(Into::into).collect(),
            summary: summary.into(),
            detail: detail.into(),
        }
    }

    /// The path joined with dots, e.g. `partition.gpu.max_time`.
    pub fn path_string(&self) -> String {
        self.path.join(".")
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.summary, self.detail)
        } else {
            write!(f, "{}: {}: {}", self.path_string(), self.summary, self.detail)
        }
    }
}

impl std::error::Error for ModelError {}
