//! Who may decide, and the signed things that say so: people and their roles, session cookies,
//! CSRF tokens and one-time links, each an HMAC-SHA256 under the inbox's secret with a domain
//! of its own (a CSRF token is never a valid session, nor a session a valid link).

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::durable::entry::hex;
use crate::inbox::html::unhex;

type HmacSha256 = hmac::Hmac<Sha256>;

/// What a signed link does once confirmed.
///
/// ```
/// use phaseo_agent::inbox::LinkAction;
///
/// assert_eq!(LinkAction::Approve.as_str(), "approve");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkAction {
    /// Approve the call (for an outcome unknown: run it again).
    Approve,
    /// Reject the call; the model reads that the link's person rejected it.
    Reject,
}

impl LinkAction {
    /// `approve` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkAction::Approve => "approve",
            LinkAction::Reject => "reject",
        }
    }
}

/// The inbox's secret, and what it signs.
#[derive(Clone)]
pub(crate) struct Keys {
    secret: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(..)")
    }
}

impl Keys {
    pub(crate) fn new(secret: &[u8]) -> Self {
        Keys {
            secret: secret.into(),
        }
    }

    /// A secret drawn from the operating system's generator: sessions and links last as long as
    /// the process.
    pub(crate) fn random() -> Self {
        Keys::new(&random_bytes::<32>())
    }

    fn mac(&self, domain: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(&(domain.len() as u64).to_le_bytes());
        mac.update(domain.as_bytes());
        mac.update(payload);
        mac
    }

    /// `hex(payload).hex(mac)`.
    pub(crate) fn seal(&self, domain: &str, payload: &[u8]) -> String {
        let tag = self.mac(domain, payload).finalize().into_bytes();
        format!("{}.{}", hex(payload), hex(&tag))
    }

    /// The payload of a token [`seal`](Self::seal) made in `domain`, checked in constant time.
    pub(crate) fn open(&self, domain: &str, token: &str) -> Option<Vec<u8>> {
        let (payload, tag) = token.split_once('.')?;
        let (payload, tag) = (unhex(payload)?, unhex(tag)?);
        self.mac(domain, &payload).verify_slice(&tag).ok()?;
        Some(payload)
    }

    /// The CSRF token of a session: the HMAC of its id.
    pub(crate) fn csrf(&self, session_id: &str) -> String {
        hex(&self
            .mac("csrf", session_id.as_bytes())
            .finalize()
            .into_bytes())
    }

    /// Whether `given` is the session's CSRF token (constant time).
    pub(crate) fn csrf_ok(&self, session_id: &str, given: &str) -> bool {
        unhex(given).is_some_and(|tag| {
            self.mac("csrf", session_id.as_bytes())
                .verify_slice(&tag)
                .is_ok()
        })
    }
}

/// A signed-in session, as its cookie carries it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Session {
    /// The user's name.
    pub(crate) user: String,
    /// Seconds since the Unix epoch after which it is refused.
    pub(crate) expires: u64,
    /// A random id, which the CSRF token is derived from.
    pub(crate) id: String,
    /// When it was made, in microseconds since the Unix epoch (0 in a cookie made before it was
    /// recorded): what a person's "every session until now" cut-off compares.
    #[serde(default)]
    pub(crate) issued_us: u64,
}

impl Session {
    pub(crate) fn new(user: &str, expires: u64) -> Self {
        Session {
            user: user.to_owned(),
            expires,
            id: hex(&random_bytes::<16>()),
            issued_us: now_us(),
        }
    }

    pub(crate) fn cookie_value(&self, keys: &Keys) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        keys.seal("session", &json)
    }

    /// The session a cookie value carries, if it is signed and not expired at `now` (seconds).
    pub(crate) fn read(keys: &Keys, value: &str, now: u64) -> Option<Self> {
        let payload = keys.open("session", value)?;
        let session: Session = serde_json::from_slice(&payload).ok()?;
        (session.expires > now).then_some(session)
    }
}

/// Microseconds since the Unix epoch, strictly increasing within the process: a session made
/// after a cut-off is always after it, even within one microsecond, or with the clock set back.
pub(crate) fn now_us() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = clock.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The sessions signed out before they expired, whose cookies are refused from then on (a
/// cookie is signed, not stored, so the server keeps what it must refuse): each by its id until
/// it would have expired, at most `max` at once. When that many are still live, signing out
/// ends every session of that person made until then instead (one cut-off per person, and the
/// people are the operator's), so a full record never lets a signed-out cookie back in.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    inner: std::sync::Mutex<EndedInner>,
}

#[derive(Debug, Default)]
struct EndedInner {
    /// Session id → when it expires (seconds since the Unix epoch).
    ids: std::collections::HashMap<String, u64>,
    /// Person → every session of theirs made at or before this (microseconds) is ended.
    cut_offs: std::collections::HashMap<String, u64>,
}

/// What signing out ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndedWhat {
    /// This session.
    Session,
    /// Every session of the person made until now: the record of ended sessions was full.
    EveryDevice,
}

impl Ended {
    fn lock(&self) -> std::sync::MutexGuard<'_, EndedInner> {
        // The maps hold no invariant a panic could break half-way.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends `session` at `now` (seconds), keeping at most `max` ended sessions by id.
    pub(crate) fn end(&self, session: &Session, now: u64, max: usize) -> EndedWhat {
        let mut inner = self.lock();
        if inner.ids.len() >= max {
            inner.ids.retain(|_, expires| *expires > now);
        }
        if inner.ids.len() < max {
            inner.ids.insert(session.id.clone(), session.expires);
            EndedWhat::Session
        } else {
            inner.cut_offs.insert(session.user.clone(), now_us());
            EndedWhat::EveryDevice
        }
    }

    /// Whether `session` was signed out.
    pub(crate) fn is_ended(&self, session: &Session) -> bool {
        let inner = self.lock();
        inner.ids.contains_key(&session.id)
            || inner
                .cut_offs
                .get(&session.user)
                .is_some_and(|cut_off| session.issued_us <= *cut_off)
    }
}

/// What a signed one-time link names: the call as it was shown, what to do, who does it, and
/// until when (seconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Link {
    pub(crate) run: String,
    pub(crate) call: String,
    pub(crate) version: u64,
    pub(crate) digest: String,
    pub(crate) action: LinkAction,
    pub(crate) user: String,
    pub(crate) expires: u64,
}

impl Link {
    pub(crate) fn token(&self, keys: &Keys) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        keys.seal("link", &json)
    }

    /// The link a token carries, if it is signed; whether it expired is the caller's check.
    pub(crate) fn read(keys: &Keys, token: &str) -> Option<Self> {
        serde_json::from_slice(&keys.open("link", token)?).ok()
    }
}

/// How a sign-in token is looked up: its SHA-256, so the lookup's timing says nothing of the
/// token's characters.
pub(crate) fn token_key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Bytes from the operating system's generator.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::fill(&mut bytes).is_err() {
        // No generator: there is no safe secret to make, and a predictable one would let anyone
        // forge a session.
        panic!("the operating system's random generator is not available");
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_token_opens_only_in_its_domain_and_unchanged() {
        let keys = Keys::new(b"secret");
        let token = keys.seal("session", b"payload");
        assert_eq!(
            keys.open("session", &token).as_deref(),
            Some(&b"payload"[..])
        );
        assert_eq!(keys.open("link", &token), None);
        assert_eq!(Keys::new(b"other").open("session", &token), None);
        let (payload, tag) = token.split_once('.').unwrap();
        let forged = format!("{}.{tag}", hex(b"payloae"));
        assert_eq!(keys.open("session", &forged), None);
        assert_eq!(keys.open("session", payload), None);
    }

    #[test]
    fn sessions_expire_and_csrf_tokens_are_per_session() {
        let keys = Keys::random();
        let session = Session::new("alice", 100);
        let cookie = session.cookie_value(&keys);
        assert_eq!(Session::read(&keys, &cookie, 99).unwrap().user, "alice");
        assert!(Session::read(&keys, &cookie, 100).is_none());
        let other = Session::new("alice", 100);
        assert_ne!(session.id, other.id);
        let csrf = keys.csrf(&session.id);
        assert!(keys.csrf_ok(&session.id, &csrf));
        assert!(!keys.csrf_ok(&other.id, &csrf));
        assert!(!keys.csrf_ok(&session.id, ""));
    }

    #[test]
    fn ended_sessions_are_kept_until_they_expire_and_a_full_record_ends_every_device() {
        let ended = Ended::default();
        let (a, b, c) = (
            Session::new("alice", 100),
            Session::new("alice", 200),
            Session::new("alice", 300),
        );
        assert_eq!(ended.end(&a, 50, 1), EndedWhat::Session);
        assert!(ended.is_ended(&a) && !ended.is_ended(&b));
        // Full of live sessions: every session of alice's until now ends.
        assert_eq!(ended.end(&b, 50, 1), EndedWhat::EveryDevice);
        assert!(ended.is_ended(&a) && ended.is_ended(&b) && ended.is_ended(&c));
        let later = Session::new("alice", 300);
        assert!(!ended.is_ended(&later));
        // Once `a` would have expired, its place is taken by the next one signed out.
        assert_eq!(ended.end(&later, 150, 1), EndedWhat::Session);
        assert!(ended.is_ended(&later));
    }
}
