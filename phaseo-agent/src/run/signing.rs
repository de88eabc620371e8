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

/// The signature under `key` of a state that carries none yet, as lowercase hex.
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
            let bytes = decode_hex(&signature).ok_or_else(|| bad("the signature is not hex"))?;
            mac(key, state).verify_slice(&bytes).map_err(|_| {
                bad("the state was changed after it was signed, or signed with another key")
            })
        }
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
