//! Signed run states: with a state key, every state an agent returns carries an HMAC-SHA256 of its
//! contents, and `resume` refuses a state whose signature does not match. A paused run is data that
//! leaves the process (a database row, a queue message); without a signature, whoever can write
//! that data can forge an approval (add a standing approval, swap a pending call's arguments).

use hmac::{KeyInit, Mac};

use crate::error::AgentError;
use crate::run::state::RunState;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The MAC of a state that carries no signature (its JSON has no `signature` field).
fn mac(key: &[u8], unsigned: &RunState) -> HmacSha256 {
    debug_assert!(unsigned.signature.is_none(), "a signature is not signed");
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    // The payload is the state's JSON without its signature. serde_json writes struct fields in
    // declaration order and object keys sorted, so the same state always gives the same bytes, also
    // after a round trip through JSON.
    mac.update(unsigned.to_json().as_bytes());
    mac
}

/// The length of a signature's text: an HMAC-SHA256 (32 bytes) as hex.
const SIGNATURE_CHARS: usize = 64;

/// Why a signature's text is refused.
const NOT_CANONICAL: &str =
    "the signature is not 64 lower-case hex digits, the only form this crate writes and reads";

/// The signature under `key` of a state that carries none yet: 64 lower-case hex digits, the only
/// form [`verify`] accepts.
pub(crate) fn sign(key: &[u8], unsigned: &RunState) -> String {
    mac(key, unsigned)
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks a state's signature in constant time, taking it off the state (which is then the payload
/// it was made from). With no key, a signed state is refused too: the agent cannot tell whether it
/// was changed (fail closed).
///
/// Only the text [`sign`] writes is accepted: 64 lower-case hex digits. Another spelling of the
/// same bytes (upper case, a `+` that a lenient number parser skips) is refused: a signature has
/// one form, so a stored state cannot be changed without the check seeing it.
pub(crate) fn verify(key: Option<&[u8]>, state: &mut RunState) -> Result<(), AgentError> {
    let bad = |reason: &str| AgentError::StateSignature(reason.to_owned());
    match (key, state.signature.take()) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(bad(
            "the state is signed, but this agent has no state key; build it with `.state_key(...)`",
        )),
        (Some(_), None) => Err(bad(
            "the state is not signed, and this agent only resumes signed states",
        )),
        (Some(key), Some(signature)) => {
            let bytes = decode_hex(&signature).ok_or_else(|| bad(NOT_CANONICAL))?;
            mac(key, state).verify_slice(&bytes).map_err(|_| {
                bad("the state was changed after it was signed, or signed with another key")
            })
        }
    }
}

/// The bytes of a signature in its canonical text, 64 lower-case hex digits; `None` for any other
/// text.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != SIGNATURE_CHARS {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_canonical_text_decodes() {
        let canonical = "00ff".repeat(16);
        let bytes = decode_hex(&canonical).unwrap();
        assert_eq!(bytes, [0x00, 0xff].repeat(16));
        for other in [
            "00FF".repeat(16),
            format!("+0{}", &canonical[2..]),
            format!("+{}", &canonical[1..]),
            format!("{canonical}00"),
            canonical[..62].to_owned(),
            String::new(),
            format!(" {}", &canonical[1..]),
            format!("0x{}", &canonical[2..]),
            format!("-0{}", &canonical[2..]),
            format!("é{}", &canonical[2..]),
        ] {
            assert_eq!(decode_hex(&other), None, "{other:?}");
        }
    }

    #[test]
    fn sign_writes_the_canonical_text() {
        let state = RunState::new("r".into(), "a".into(), serde_json::Value::Null);
        let signature = sign(b"a key of thirty-two bytes, or so", &state);
        assert_eq!(signature.len(), SIGNATURE_CHARS);
        assert!(decode_hex(&signature).is_some());
    }
}
