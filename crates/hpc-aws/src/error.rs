//! Errors from AWS calls, with what we were doing and the service's code and message.

use std::fmt;

use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    /// What we were doing, e.g. "creating Lustre file system (us-east-1)".
    pub context: String,
    /// The service's error code, e.g. `BadRequest`; None for network or timeout errors.
    pub code: Option<String>,
    pub message: String,
}

impl AwsError {
    pub fn new(context: impl Into<String>, code: Option<&str>, message: impl Into<String>) -> Self {
        AwsError {
            context: context.into(),
            code: code.map(str::to_string),
            message: message.into(),
        }
    }

    /// From an SDK error: the service's code and message when there is one, else the whole chain.
    pub fn from_sdk<E>(context: impl Into<String>, err: &E) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error,
    {
        let message = match err.message() {
            Some(m) => m.to_string(),
            None => DisplayErrorContext(err).to_string(),
        };
        AwsError {
            context: context.into(),
            code: err.code().map(str::to_string),
            message,
        }
    }

    pub fn code_is(&self, codes: &[&str]) -> bool {
        self.code.as_deref().is_some_and(|c| codes.contains(&c))
    }

    /// `Ok(value)` when the error has one of `codes` (not-found on delete or read, duplicate
    /// on create), the error otherwise.
    pub fn or_ok_if<T>(self, codes: &[&str], value: T) -> Result<T> {
        if self.code_is(codes) {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{}: {code}: {}", self.context, self.message),
            None => write!(f, "{}: {}", self.context, self.message),
        }
    }
}

impl std::error::Error for AwsError {}

pub type Result<T> = std::result::Result<T, AwsError>;
