//! Headers checked when they are set: a name or value HTTP cannot carry is reported by the setter
//! ([`HeaderError`]), so that no request is ever built with it.

use std::fmt;

use reqwest::header::{HeaderName, HeaderValue};

/// A header a provider was given that HTTP cannot carry: returned by the setter
/// ([`header`](crate::provider::HttpModel::header), [`api_key`](crate::provider::HttpModel::api_key),
/// `Anthropic::version`), so that nothing is ever sent with it.
///
/// The message names the header and says what is wrong, and where; it never shows a value, which
/// may be a secret.
///
/// ```
/// use phaseo_agent::provider::openai::OpenAi;
///
/// let error = OpenAi::new("gpt-4.1").header("X-Title", "Ops\nagent").unwrap_err();
/// assert_eq!(error.name(), "X-Title");
/// assert_eq!(
///     error.to_string(),
///     "the value of header `X-Title` has a control character at byte 3, which HTTP does not \
///      allow (the value is not shown: it may be a secret)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct HeaderError {
    name: String,
    problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    /// The name is not an HTTP token.
    Name,
    /// The value has a byte HTTP does not allow, at this offset.
    Value(usize),
    /// The API key has such a byte, at this offset; it was to be sent in the header `name`.
    Key(usize),
    /// The key an environment variable (`name`) holds has such a byte, at this offset.
    EnvKey(usize),
}

impl HeaderError {
    /// The header's name, as it was given (or, for an API key, the header it goes in; for a key
    /// from the environment, the variable).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same error, for the key an environment variable held (see `from_env`).
    pub(crate) fn for_variable(self, variable: &str) -> Self {
        match self.problem {
            Problem::Key(at) => HeaderError {
                name: variable.to_owned(),
                problem: Problem::EnvKey(at),
            },
            _ => self,
        }
    }

    fn describe(&self) -> String {
        const BAD: &str = "a control character";
        match self.problem {
            Problem::Name if self.name.is_empty() => "a header name is empty".to_owned(),
            Problem::Name => format!(
                "the header name `{}` is not one HTTP allows (a name is letters, digits and \
                 !#$%&'*+-.^_`|~)",
                Shown(&self.name)
            ),
            Problem::Value(at) => format!(
                "the value of header `{}` has {BAD} at byte {at}, which HTTP does not allow (the \
                 value is not shown: it may be a secret)",
                Shown(&self.name)
            ),
            Problem::Key(at) => format!(
                "the API key has {BAD} at byte {at}, so no `{}` header can carry it (the key is \
                 not shown)",
                self.name
            ),
            Problem::EnvKey(at) => format!(
                "the key in {} has {BAD} at byte {at}, so no header can carry it, and nothing \
                 is sent (the key is not shown): fix the variable, or set the key with `api_key`",
                self.name
            ),
        }
    }
}

/// A name for a message: control characters escaped, at most 100 characters.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars().take(100) {
            write!(f, "{}", c.escape_debug())?;
        }
        if self.0.chars().nth(100).is_some() {
            f.write_str("...")?;
        }
        Ok(())
    }
}

/// A header as given to `header`: the name must be an HTTP token; the value loses the whitespace
/// around it (HTTP does not count it as part of a field's value) and must then have no control
/// character. The value is marked sensitive: it may be a credential (Azure's `api-key`, a proxy's
/// token), and HTTP/2 then never puts it in a compression table.
pub(crate) fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), HeaderError> {
    let error = |problem| HeaderError {
        name: name.to_owned(),
        problem,
    };
    let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| error(Problem::Name))?;
    let value = sensitive(value.trim()).map_err(|at| error(Problem::Value(at)))?;
    Ok((parsed, value))
}

/// The value of the key header (`header`) for `key`, which has already lost its surrounding
/// whitespace; `scheme` is what goes before the key (`Bearer `), if anything.
pub(crate) fn key(
    header: &HeaderName,
    scheme: &str,
    key: &str,
) -> Result<HeaderValue, HeaderError> {
    if let Some(at) = forbidden(key) {
        return Err(HeaderError {
            name: header.as_str().to_owned(),
            problem: Problem::Key(at),
        });
    }
    sensitive(&format!("{scheme}{key}")).map_err(|at| HeaderError {
        name: header.as_str().to_owned(),
        problem: Problem::Value(at),
    })
}

/// `value` as a sensitive header value, or the offset of its first forbidden byte.
fn sensitive(value: &str) -> Result<HeaderValue, usize> {
    if let Some(at) = forbidden(value) {
        return Err(at);
    }
    let mut value = HeaderValue::from_str(value).map_err(|_| 0_usize)?;
    value.set_sensitive(true);
    Ok(value)
}

/// The offset of the first byte a header value cannot hold: a control character other than tab
/// (RFC 9110, section 5.5), which `HeaderValue` refuses too.
fn forbidden(value: &str) -> Option<usize> {
    value
        .bytes()
        .position(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_tokens_and_values_must_have_no_control_characters() {
        let (name, value) = header("X-Title", "  Ops agent \t").unwrap();
        assert_eq!(name.as_str(), "x-title");
        assert_eq!(value, "Ops agent");
        assert!(value.is_sensitive());
        for name in ["", "X Title", "X-Title:", "Ümlaut", "a\nb"] {
            let error = header(name, "v").unwrap_err();
            assert_eq!(error.problem, Problem::Name, "{name:?}");
        }
        for (value, at) in [("a\nb", 1), ("a\rb", 1), ("\0", 0), ("tab\tok\x7f", 6)] {
            let error = header("x-a", value).unwrap_err();
            assert_eq!(error.problem, Problem::Value(at), "{value:?}");
        }
        // Bytes beyond ASCII are allowed (obs-text), as `HeaderValue` allows them.
        assert!(header("x-a", "café").is_ok());
    }

    #[test]
    fn no_message_shows_a_value() {
        let secret = "sk-secret\n";
        let messages = [
            header("x-a", &format!("{secret}x"))
                .unwrap_err()
                .to_string(),
            key(
                &reqwest::header::AUTHORIZATION,
                "Bearer ",
                &format!("{secret}x"),
            )
            .unwrap_err()
            .to_string(),
            key(&reqwest::header::AUTHORIZATION, "", &format!("{secret}x"))
                .unwrap_err()
                .for_variable("OPENAI_API_KEY")
                .to_string(),
        ];
        for message in messages {
            assert!(!message.contains("sk-secret"), "{message}");
            assert!(message.contains("byte 9"), "{message}");
        }
    }

    #[test]
    fn a_long_or_odd_name_is_shown_escaped_and_cut() {
        let error = header(&format!("a\n{}", "b".repeat(500)), "v").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("`a\\nbbb"), "{message}");
        assert!(message.len() < 300, "{message}");
    }
}
