//! Whether spans record content (messages, instructions, tool arguments and results).

use std::fmt;
use std::sync::Arc;

use crate::telemetry::semconv::CAPTURE_CONTENT_ENV;

/// A redaction hook: given an attribute's name (`gen_ai.tool.call.arguments`, ...) and its text,
/// returns the text to record.
type Redact = dyn Fn(&str, String) -> String + Send + Sync;

/// Whether an agent's spans record content: the messages and instructions sent to the model
/// (`gen_ai.input.messages`, `gen_ai.system_instructions`), its answers
/// (`gen_ai.output.messages`), and tool calls' arguments and results
/// (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`).
///
/// **Off by default**: prompts and arguments often hold what a trace backend must not keep. The
/// default follows the environment variable the OpenTelemetry instrumentations of other languages
/// read, `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true`, in any case, turns it on;
/// anything else leaves it off), read when the agent is built; a setting on the agent
/// ([`AgentBuilder::capture_content`](crate::AgentBuilder::capture_content)) wins over it.
///
/// Each recorded text goes through the redaction hook, if any, and is then cut to
/// [`max_bytes`](Self::max_bytes) (16 KiB unless set), at a character boundary, with
/// `…[truncated]` appended.
///
/// ```
/// use phaseo_agent::telemetry::CaptureContent;
///
/// let capture = CaptureContent::on()
///     .max_bytes(4096)
///     .redact(|_attribute, text| text.replace("hunter2", "[redacted]"));
/// assert!(capture.is_on());
/// assert!(!CaptureContent::off().is_on());
/// ```
#[derive(Clone)]
pub struct CaptureContent {
    on: bool,
    max_bytes: usize,
    redact: Option<Arc<Redact>>,
}

/// The default cap on one recorded text.
const DEFAULT_MAX_BYTES: usize = 16 * 1024;

impl CaptureContent {
    /// Record no content.
    pub fn off() -> Self {
        CaptureContent {
            on: false,
            max_bytes: DEFAULT_MAX_BYTES,
            redact: None,
        }
    }

    /// Record content, redacted and capped.
    pub fn on() -> Self {
        CaptureContent {
            on: true,
            ..Self::off()
        }
    }

    /// On when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true` (in any case), off
    /// otherwise: the default.
    pub fn from_env() -> Self {
        let on = std::env::var(CAPTURE_CONTENT_ENV)
            .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        if on { Self::on() } else { Self::off() }
    }

    /// Cuts each recorded text to `bytes` (16 KiB unless set).
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Passes each recorded text through `redact` first, with the attribute's name. A panic in
    /// the hook records `[redaction failed]` instead of the text.
    pub fn redact(
        mut self,
        redact: impl Fn(&str, String) -> String + Send + Sync + 'static,
    ) -> Self {
        self.redact = Some(Arc::new(redact));
        self
    }

    /// Whether content is recorded.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The text to record under `attribute`, made only when capture is on.
    pub(crate) fn text(&self, attribute: &str, make: impl FnOnce() -> String) -> Option<String> {
        if !self.on {
            return None;
        }
        let mut text = make();
        if let Some(redact) = &self.redact {
            let hook = std::panic::AssertUnwindSafe(|| redact(attribute, text));
            text = std::panic::catch_unwind(hook).unwrap_or_else(|_| "[redaction failed]".into());
        }
        if text.len() > self.max_bytes {
            let mut end = self.max_bytes;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("…[truncated]");
        }
        Some(text)
    }
}

impl Default for CaptureContent {
    /// [`from_env`](Self::from_env).
    fn default() -> Self {
        Self::from_env()
    }
}

impl fmt::Debug for CaptureContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureContent")
            .field("on", &self.on)
            .field("max_bytes", &self.max_bytes)
            .field("redact", &self.redact.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_makes_nothing() {
        let made = std::cell::Cell::new(false);
        let text = CaptureContent::off().text("a", || {
            made.set(true);
            "x".into()
        });
        assert_eq!(text, None);
        assert!(
            !made.get(),
            "content is not even formatted when capture is off"
        );
    }

    #[test]
    fn redacts_then_caps_at_a_char_boundary() {
        let capture = CaptureContent::on()
            .max_bytes(5)
            .redact(|attribute, text| format!("{attribute}:{}", text.replace("secret", "*")));
        assert_eq!(
            capture.text("k", || "secret".into()).as_deref(),
            Some("k:*")
        );
        let capture = CaptureContent::on().max_bytes(4);
        assert_eq!(
            capture.text("k", || "aéé".into()).as_deref(),
            Some("aé…[truncated]")
        );
        let panics = CaptureContent::on().redact(|_, _| panic!("no"));
        assert_eq!(
            panics.text("k", || "x".into()).as_deref(),
            Some("[redaction failed]")
        );
    }
}
