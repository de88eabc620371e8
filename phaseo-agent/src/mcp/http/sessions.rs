//! The sessions of a Streamable HTTP server: rmcp's in-memory sessions, bounded in number and
//! in idle time.

use std::sync::Arc;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

use crate::limits::{Limit, LimitExceeded, McpServerLimits};

/// The sessions of [`McpHttpService`](super::McpHttpService): rmcp's `LocalSessionManager`
/// (sessions in this process's memory), with at most
/// [`McpServerLimits::max_sessions`] at once, each ended once unused for
/// [`McpServerLimits::session_idle_timeout`].
///
/// A client past the limit is refused: [`McpHttpService`](super::McpHttpService) (and so
/// `serve_http`) answers 503 with a `Retry-After` before the request reaches rmcp. Two new
/// clients that race for the last place both pass that check, and rmcp answers the one it
/// cannot make a session for with 500; either way the text names the setting.
#[derive(Debug)]
pub struct BoundedSessions {
    local: LocalSessionManager,
    max: usize,
    /// Held while a session is counted and created, so two new clients cannot both take the
    /// last place.
    creating: tokio::sync::Mutex<()>,
}

impl BoundedSessions {
    /// Sessions bounded by `limits`.
    pub(crate) fn new(limits: &McpServerLimits) -> Self {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(limits.session_idle());
        BoundedSessions {
            local,
            max: limits.sessions(),
            creating: tokio::sync::Mutex::new(()),
        }
    }

    /// The sessions kept now.
    pub(crate) async fn count(&self) -> usize {
        self.local.sessions.read().await.len()
    }

    /// Whether a new session would be refused now.
    pub(crate) async fn full(&self) -> bool {
        self.count().await >= self.max
    }

    /// The refusal of a session past the limit.
    pub(crate) fn refusal(&self) -> LimitExceeded {
        LimitExceeded::count(Limit::McpSessions, self.max)
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionsError {
    /// The server keeps [`McpServerLimits::max_sessions`] sessions already.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// rmcp's sessions failed (an unknown session, one that ended, ...).
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        if self.full().await {
            return Err(self.refusal().into());
        }
        Ok(self.local.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Sessions live in this process only: one that is not here is not restored (404), and
        // restoring would create a session past the limit.
        let _ = id;
        Ok(RestoreOutcome::NotSupported)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.local.event_store()
    }
}
