//! What a listing of a store asks and returns: the filters of waiting calls, runs and
//! decisions, a page of results, and the rows a listing could not read back as written.

use std::fmt::Write as _;

use crate::error::StoreError;
use crate::error::StoredStatus;

/// Which waiting calls to list. Every field narrows the list; the default lists everything, newest
/// first, 50 at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFilter {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only this run.
    pub run_id: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only this kind (`tool_approval`, `external_output`, `hitl`, `outcome_unknown`).
    pub kind: Option<String>,
    /// Only calls waiting since before this time (milliseconds since the Unix epoch).
    pub older_than_ms: Option<i64>,
    /// Only calls without a recorded decision.
    pub undecided_only: bool,
    /// The page after this cursor (from [`Page::next`]).
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for PendingFilter {
    fn default() -> Self {
        PendingFilter {
            agent_id: None,
            run_id: None,
            tool: None,
            kind: None,
            older_than_ms: None,
            undecided_only: false,
            after: None,
            limit: 50,
        }
    }
}

/// Which runs to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<StoredStatus>,
    /// The page after this cursor.
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            agent_id: None,
            status: None,
            after: None,
            limit: 50,
        }
    }
}

/// Which decisions of the audit log to list, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this run's decisions.
    pub run_id: Option<String>,
    /// The page after this cursor.
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            run_id: None,
            after: None,
            limit: 50,
        }
    }
}

/// One page of a listing, and the cursor of the next (`None` on the last page).
///
/// A listing of waiting calls names in [`damaged`](Self::damaged) the rows of this page that
/// could not be read back as written, in place of leaving them out or failing the whole page: a
/// damaged row is its run's problem, and the people who must decide the other runs' calls still
/// see them.
///
/// ```
/// use phaseo_agent::store::Page;
///
/// let page = Page::new(vec!["a", "b"], Some("cursor".to_owned()));
/// assert_eq!(page.items.len(), 2);
/// assert!(page.damaged.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Pass as `after` for the next page.
    pub next: Option<String>,
    /// The rows of this page that could not be read back as written (listings of waiting calls;
    /// empty elsewhere). They count towards the page's limit, and the cursor moves past them.
    pub damaged: Vec<DamagedRow>,
}

impl<T> Page<T> {
    /// A page of `items`, and the cursor of the next, with no damaged row: what a
    /// [`RunStore`](crate::store::RunStore) of your own returns.
    pub fn new(items: Vec<T>, next: Option<String>) -> Self {
        Page {
            items,
            next,
            damaged: Vec::new(),
        }
    }
}

/// A stored waiting call that a listing could not read back as written: its text is not valid
/// (not UTF-8, in a SQLite file written by another program), its kind is none of the four, its
/// arguments or recorded decision are not JSON, it is larger than the store reads
/// ([`ReadLimits`](crate::store::ReadLimits)), or its arguments do not match their digest. It was changed in the database
/// or written by a bug; it cannot be decided until someone repairs or removes it, and loading its
/// run refuses it as [`StoreError::Corrupt`].
///
/// ```
/// use phaseo_agent::store::DamagedRow;
///
/// let row = DamagedRow {
///     run_id: "run_1".into(),
///     call_id: Some("call_1".into()),
///     version: Some(4),
///     reason: "unknown kind `approval_please`".into(),
/// };
/// assert_eq!(
///     row.to_string(),
///     "run `run_1`, call `call_1` at version 4: unknown kind `approval_please`"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRow {
    /// The run (any bytes of it that are not UTF-8 shown as U+FFFD).
    pub run_id: String,
    /// The call, if its id could be read.
    pub call_id: Option<String>,
    /// The run's version when the call started waiting, if it could be read.
    pub version: Option<u64>,
    /// What is wrong with the row.
    pub reason: String,
}

impl std::fmt::Display for DamagedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run `{}`", self.run_id)?;
        if let Some(call) = &self.call_id {
            write!(f, ", call `{call}`")?;
        }
        if let Some(version) = self.version {
            write!(f, " at version {version}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// A cursor's parts: a prefix naming the listing, then fields separated by `.`, texts in hex (so
/// an id may hold any character).
pub(crate) fn encode(prefix: &str, number: i64, texts: &[&str]) -> String {
    let mut cursor = format!("{prefix}.{number}");
    for text in texts {
        cursor.push('.');
        for byte in text.as_bytes() {
            let _ = write!(cursor, "{byte:02x}");
        }
    }
    cursor
}

/// A cursor's number and texts, if it is one of this listing's with `texts` texts.
pub(crate) fn decode(
    prefix: &str,
    texts: usize,
    cursor: &str,
) -> Result<(i64, Vec<String>), StoreError> {
    let invalid = || StoreError::InvalidCursor {
        cursor: cursor.to_owned(),
    };
    let mut parts = cursor.split('.');
    if parts.next() != Some(prefix) {
        return Err(invalid());
    }
    let number = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(invalid)?;
    let mut decoded = Vec::with_capacity(texts);
    for part in parts {
        if part.len() % 2 != 0 {
            return Err(invalid());
        }
        let bytes = part
            .as_bytes()
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).ok()?;
                u8::from_str_radix(pair, 16).ok()
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(invalid)?;
        decoded.push(String::from_utf8(bytes).map_err(|_| invalid())?);
    }
    if decoded.len() != texts {
        return Err(invalid());
    }
    Ok((number, decoded))
}
