//! The sampling settings every provider shares: a model's defaults (`temperature`, `top_p`,
//! `max_output_tokens`, `stop`, `seed`; set by `HttpModel`'s setters of those names), each
//! overridden by a request's own, and how they go on the wire ([`Sampling::write`]).

use serde_json::{Map, Number, Value, json};

use crate::error::{ModelError, ModelErrorKind};
use crate::model::request::ModelRequest;

/// A model's sampling defaults, each sent when a request does not set its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sampling {
    pub(crate) temperature: Option<f32>,
    pub(crate) top_p: Option<f32>,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) stop: Option<Vec<String>>,
    pub(crate) seed: Option<u64>,
}

/// What a wire format calls the sampling fields that differ between formats.
pub(crate) struct Fields<'a> {
    /// The output limit's field (`max_tokens`, `max_completion_tokens`).
    pub(crate) max_tokens: &'a str,
    /// The stop sequences' field (`stop`, `stop_sequences`).
    pub(crate) stop: &'a str,
    /// The seed's field, if the format has one.
    pub(crate) seed: Option<&'a str>,
    /// The output limit sent when neither the request nor the model sets one (Anthropic requires
    /// one), if any.
    pub(crate) max_tokens_default: Option<u32>,
}

impl Sampling {
    /// Writes the settings of `request` into `body`: each the request's own when it sets it,
    /// else this default; unset ones are left out, and so is an empty list of stop sequences
    /// (a request's empty list overrides a default one). A temperature or `top_p` that is not a
    /// finite number is a [`ModelErrorKind::BadRequest`], before anything is sent.
    pub(crate) fn write(
        &self,
        request: &ModelRequest<'_>,
        fields: &Fields<'_>,
        body: &mut Map<String, Value>,
    ) -> Result<(), ModelError> {
        let temperature = request.temperature.or(self.temperature);
        if let Some(number) = number("temperature", temperature)? {
            body.insert("temperature".into(), Value::Number(number));
        }
        if let Some(number) = number("top_p", request.top_p.or(self.top_p))? {
            body.insert("top_p".into(), Value::Number(number));
        }
        let max = request.max_output_tokens.or(self.max_output_tokens);
        if let Some(max) = max.or(fields.max_tokens_default) {
            body.insert(fields.max_tokens.into(), json!(max));
        }
        let stop = request.stop.as_deref().or(self.stop.as_deref());
        if let Some(stop) = stop.filter(|stop| !stop.is_empty()) {
            body.insert(fields.stop.into(), json!(stop));
        }
        if let (Some(field), Some(seed)) = (fields.seed, request.seed.or(self.seed)) {
            body.insert(field.into(), json!(seed));
        }
        Ok(())
    }
}

/// `value` as the decimal it was written as, or a bad request naming `setting`.
fn number(setting: &str, value: Option<f32>) -> Result<Option<Number>, ModelError> {
    value
        .map(|value| {
            decimal(value).ok_or_else(|| {
                ModelError::new(
                    ModelErrorKind::BadRequest,
                    format!("the {setting} {value} is not a number"),
                )
            })
        })
        .transpose()
}

/// An `f32` setting (a temperature) as the decimal it was written as (`0.7`, not
/// `0.699999988079071`), or `None` when it is not a finite number.
pub(crate) fn decimal(value: f32) -> Option<Number> {
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_given() {
        assert_eq!(decimal(0.7).unwrap().to_string(), "0.7");
        assert_eq!(decimal(f32::NAN), None);
    }
}
