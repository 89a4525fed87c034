//! Secrets Manager: the munge key and database passwords. Secret values are generated and
//! stored here; only ARNs ever leave this module towards Terraform state.

use aws_sdk_secretsmanager::primitives::Blob;
use aws_sdk_secretsmanager::types::Tag;
use aws_sdk_secretsmanager::Client;

use crate::error::{AwsError, Result};

/// A secret's value as Secrets Manager stores it. Its Debug form hides the value.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretValue {
    Binary(Vec<u8>),
    Text(String),
}

impl SecretValue {
    pub fn bytes(&self) -> &[u8] {
        match self {
            SecretValue::Binary(b) => b,
            SecretValue::Text(t) => t.as_bytes(),
        }
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue(<{} bytes>)", self.bytes().len())
    }
}

/// Days a deleted secret can be restored (Secrets Manager's minimum; its default is 30).
pub const RECOVERY_WINDOW_DAYS: i64 = 7;

#[derive(Clone, Debug)]
pub struct Secrets {
    client: Client,
    region: String,
}

/// `n` random bytes from the operating system.
pub fn random_bytes(n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| AwsError::new("generating a secret", None, e.to_string()))?;
    Ok(buf)
}

/// `n` random letters and digits (rejection sampling keeps each of the 62 equally likely).
pub fn random_password(n: usize) -> Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(n);
    while out.len() < n {
        for b in random_bytes(n)? {
            // 248 = 4 * 62: bytes above it would favour the first letters.
            if b < 248 && out.len() < n {
                out.push(char::from(ALPHABET[usize::from(b) % ALPHABET.len()]));
            }
        }
    }
    Ok(out)
}

impl Secrets {
    pub fn new(client: Client, region: String) -> Self {
        Secrets { client, region }
    }

    fn ctx(&self, what: &str, name: &str) -> String {
        format!("{what} {name} ({})", self.region)
    }

    /// Creates a binary secret with freshly generated random bytes, or returns the ARN of the
    /// secret of that name if it already exists (an interrupted create adopts its own secret).
    pub async fn ensure_random_binary(&self, name: &str, bytes: usize, tags: &[(String, String)]) -> Result<String> {
        self.ensure_generated(name, tags, || random_bytes(bytes).map(SecretValue::Binary))
            .await
    }

    /// Like [`Secrets::ensure_random_binary`], a text secret of `chars` letters and digits (a
    /// password any configuration file can carry unquoted).
    pub async fn ensure_random_password(&self, name: &str, chars: usize, tags: &[(String, String)]) -> Result<String> {
        self.ensure_generated(name, tags, || random_password(chars).map(SecretValue::Text))
            .await
    }

    async fn ensure_generated(
        &self,
        name: &str,
        tags: &[(String, String)],
        generate: impl FnOnce() -> Result<SecretValue>,
    ) -> Result<String> {
        match self.state(name).await? {
            Some((arn, false)) => Ok(arn),
            // A cluster of this name was destroyed within the recovery window: restore the name
            // and give it a new value, as a new secret would have.
            Some((arn, true)) => {
                self.restore(name).await?;
                self.put_version(name, &generate()?).await?;
                Ok(arn)
            }
            None => self.create(name, &generate()?, tags).await,
        }
    }

    /// Stores `value` under `name`: a new version of the secret when it exists and holds another
    /// value (restored first if it is scheduled for deletion), else a new secret. Returns its ARN.
    /// Never deletes: AWS keeps a deleted secret's name reserved through its recovery window.
    pub async fn put(&self, name: &str, value: &SecretValue, tags: &[(String, String)]) -> Result<String> {
        match self.state(name).await? {
            Some((arn, deleted)) => {
                if deleted {
                    self.restore(name).await?;
                } else if self.value(name).await.is_ok_and(|current| &current == value) {
                    return Ok(arn);
                }
                self.put_version(name, value).await?;
                Ok(arn)
            }
            None => self.create(name, value, tags).await,
        }
    }

    /// The secret's ARN and whether it is scheduled for deletion; None when there is none.
    async fn state(&self, name: &str) -> Result<Option<(String, bool)>> {
        match self.client.describe_secret().secret_id(name).send().await {
            Ok(out) => Ok(Some((
                out.arn().unwrap_or_default().to_string(),
                out.deleted_date().is_some(),
            ))),
            Err(e) => {
                AwsError::from_sdk(self.ctx("reading secret", name), &e).or_ok_if(&["ResourceNotFoundException"], None)
            }
        }
    }

    async fn create(&self, name: &str, value: &SecretValue, tags: &[(String, String)]) -> Result<String> {
        let tags: Vec<Tag> = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        let request = self
            .client
            .create_secret()
            .name(name)
            .set_tags(Some(tags))
            .description("Kept by hpcforge for a cluster; never stored in Terraform state.");
        let request = match value {
            SecretValue::Binary(b) => request.secret_binary(Blob::new(b.clone())),
            SecretValue::Text(t) => request.secret_string(t),
        };
        match request.send().await {
            Ok(out) => Ok(out.arn().unwrap_or_default().to_string()),
            Err(e) => {
                let err = AwsError::from_sdk(self.ctx("creating secret", name), &e);
                // Another apply (or an interrupted one) created it first: adopt it.
                if err.code_is(&["ResourceExistsException"]) {
                    self.find(name).await?.ok_or(err)
                } else {
                    Err(err)
                }
            }
        }
    }

    async fn put_version(&self, name: &str, value: &SecretValue) -> Result<()> {
        let request = self.client.put_secret_value().secret_id(name);
        let request = match value {
            SecretValue::Binary(b) => request.secret_binary(Blob::new(b.clone())),
            SecretValue::Text(t) => request.secret_string(t),
        };
        request
            .send()
            .await
            .map(|_| ())
            .map_err(|e| AwsError::from_sdk(self.ctx("storing a new version of secret", name), &e))
    }

    async fn restore(&self, name: &str) -> Result<()> {
        self.client
            .restore_secret()
            .secret_id(name)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| AwsError::from_sdk(self.ctx("restoring secret (scheduled for deletion)", name), &e))
    }

    /// The current value of a secret (binary or text), for the node that needs it. Never logged.
    pub async fn value(&self, name_or_arn: &str) -> Result<SecretValue> {
        let out = self
            .client
            .get_secret_value()
            .secret_id(name_or_arn)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(self.ctx("reading the value of secret", name_or_arn), &e))?;
        if let Some(blob) = out.secret_binary() {
            return Ok(SecretValue::Binary(blob.as_ref().to_vec()));
        }
        match out.secret_string() {
            Some(text) => Ok(SecretValue::Text(text.to_string())),
            None => Err(AwsError::new(
                self.ctx("reading the value of secret", name_or_arn),
                None,
                "the secret has no value",
            )),
        }
    }

    /// The ARN of the secret with this name or ARN, if it exists and is not scheduled for deletion.
    pub async fn find(&self, name_or_arn: &str) -> Result<Option<String>> {
        match self.client.describe_secret().secret_id(name_or_arn).send().await {
            Ok(out) if out.deleted_date().is_none() => Ok(out.arn().map(str::to_string)),
            Ok(_) => Ok(None),
            Err(e) => AwsError::from_sdk(self.ctx("reading secret", name_or_arn), &e)
                .or_ok_if(&["ResourceNotFoundException"], None),
        }
    }

    /// Schedules the secret for deletion after Secrets Manager's shortest recovery window
    /// ([`RECOVERY_WINDOW_DAYS`]): it can be restored until then, and a cluster created again
    /// under the same name restores it (see [`Secrets::put`]). A secret already scheduled is left so.
    pub async fn delete(&self, name_or_arn: &str) -> Result<()> {
        match self.state(name_or_arn).await? {
            None | Some((_, true)) => return Ok(()),
            Some((_, false)) => {}
        }
        match self
            .client
            .delete_secret()
            .secret_id(name_or_arn)
            .recovery_window_in_days(RECOVERY_WINDOW_DAYS)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => AwsError::from_sdk(self.ctx("deleting secret", name_or_arn), &e)
                .or_ok_if(&["ResourceNotFoundException"], ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_letters_and_digits_of_the_asked_length() {
        let a = random_password(32).expect("password");
        let b = random_password(32).expect("password");
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_secret_value_never_shows_in_debug_output() {
        let v = SecretValue::Text("hunter2hunter2".into());
        assert_eq!(format!("{v:?}"), "SecretValue(<14 bytes>)");
    }
}
