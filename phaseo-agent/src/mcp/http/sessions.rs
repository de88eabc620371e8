//! The sessions of a Streamable HTTP server: rmcp's in-memory sessions, bounded in number and
//! in idle time.
//!
//! rmcp's own idle timeout (`SessionConfig::keep_alive`) counts only the messages that pass: a
//! session whose one request is a `tools/call` running longer than the timeout is ended under
//! it, and the call's answer is lost while the tool runs on. It is left off; [`SessionTransport`]
//! keeps the idle clock instead, stopped while a call runs.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use rmcp::transport::{Transport, WorkerTransport};
use tokio::time::Instant;

use crate::limits::{Limit, LimitExceeded, McpServerLimits};

/// The sessions of [`McpHttpService`](super::McpHttpService): rmcp's `LocalSessionManager`
/// (sessions in this process's memory), with at most
/// [`McpServerLimits::max_sessions`] at once, each ended once unused for
/// [`McpServerLimits::session_idle_timeout`]. A session is not unused while one of its calls
/// runs: its idle clock starts when the last call ends (or the last message arrives). A call that
/// waits for the client's answer (a person's approval) does not hold its session: the client
/// that went away would hold it for ever.
///
/// A client past the limit is refused: [`McpHttpService`](super::McpHttpService) (and so
/// `serve_http`) answers 503 with a `Retry-After` before the request reaches rmcp. Two new
/// clients that race for the last place both pass that check, and rmcp answers the one it
/// cannot make a session for with 500; either way the text names the setting.
#[derive(Debug)]
pub struct BoundedSessions {
    /// Shared with each session's transport, which ends its session once unused.
    local: Arc<LocalSessionManager>,
    max: usize,
    idle: Duration,
    /// Held while a session is counted and created, so two new clients cannot both take the
    /// last place.
    creating: tokio::sync::Mutex<()>,
}

impl BoundedSessions {
    /// Sessions bounded by `limits`.
    pub(crate) fn new(limits: &McpServerLimits) -> Self {
        let mut local = LocalSessionManager::default();
        // rmcp's idle timeout ends a session under a running call: ours is `SessionTransport`'s.
        local.session_config.keep_alive = None;
        BoundedSessions {
            local: Arc::new(local),
            max: limits.sessions(),
            idle: limits.session_idle(),
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
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        if self.full().await {
            return Err(self.refusal().into());
        }
        let (id, transport) = self.local.create_session().await?;
        let transport = SessionTransport {
            inner: transport,
            sessions: self.local.clone(),
            id: id.clone(),
            idle: self.idle,
            last: Instant::now(),
            running: HashSet::new(),
            asking: HashSet::new(),
        };
        Ok((id, transport))
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

/// The transport of one session of [`BoundedSessions`]: rmcp's, with the session's idle clock.
///
/// It sees every message of the session, both ways: the client's requests it has not answered
/// yet are calls running, and the server's requests the client has not answered yet are calls
/// waiting for the client. While some call runs without waiting for the client, the session is
/// busy; otherwise, once nothing has passed for
/// [`McpServerLimits::session_idle_timeout`], the input ends, and rmcp ends the session (its id
/// then answers 404).
pub struct SessionTransport {
    inner: WorkerTransport<LocalSessionWorker>,
    /// The sessions this one is of, and its id there: an unused session is taken out at once.
    sessions: Arc<LocalSessionManager>,
    id: SessionId,
    idle: Duration,
    /// When the last message passed, either way.
    last: Instant,
    /// The client's requests not answered yet (a cancelled one is never answered: MCP).
    running: HashSet<RequestId>,
    /// The server's requests the client has not answered yet.
    asking: HashSet<RequestId>,
}

impl std::fmt::Debug for SessionTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTransport")
            .field("idle", &self.idle)
            .field("running", &self.running.len())
            .field("asking", &self.asking.len())
            .finish_non_exhaustive()
    }
}

impl SessionTransport {
    /// Some call runs on the server, not waiting for the client. Each call waits on at most one
    /// request of the server's at a time.
    fn busy(&self) -> bool {
        self.running.len() > self.asking.len()
    }

    /// A message from the client.
    fn received(&mut self, message: &ClientJsonRpcMessage) {
        self.last = Instant::now();
        match message {
            JsonRpcMessage::Request(request) => {
                self.running.insert(request.id.clone());
            }
            JsonRpcMessage::Response(response) => {
                self.asking.remove(&response.id);
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.asking.remove(id);
                }
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    if let Some(id) = &cancelled.params.request_id {
                        self.running.remove(id);
                    }
                }
            }
        }
    }

    /// A message from the server.
    fn sent(&mut self, message: &ServerJsonRpcMessage) {
        self.last = Instant::now();
        match message {
            JsonRpcMessage::Request(request) => {
                self.asking.insert(request.id.clone());
            }
            JsonRpcMessage::Response(response) => {
                self.running.remove(&response.id);
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.running.remove(id);
                }
            }
            JsonRpcMessage::Notification(notification) => {
                if let ServerNotification::CancelledNotification(cancelled) =
                    &notification.notification
                {
                    if let Some(id) = &cancelled.params.request_id {
                        self.asking.remove(id);
                    }
                }
            }
        }
    }

    /// When the session will have been unused for its idle time, if nothing passes before;
    /// `None` while it is busy (or for an idle time past any clock).
    fn idle_at(&self) -> Option<Instant> {
        if self.busy() {
            return None;
        }
        self.last.checked_add(self.idle)
    }
}

impl Transport<RoleServer> for SessionTransport {
    type Error = <WorkerTransport<LocalSessionWorker> as Transport<RoleServer>>::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.sent(&item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        // `send` and `receive` take the transport whole, so nothing changes while this waits;
        // rmcp calls `receive` again after each message, either way.
        let idle_at = self.idle_at();
        let unused = async {
            match idle_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let message = tokio::select! {
            message = self.inner.receive() => message,
            () = unused => {
                // Out of the sessions at once (its id answers 404, its place is free), its
                // worker ended; then the end of the input: rmcp ends the service. A call that
                // waits for the client is cancelled after rmcp's wait for answers.
                let _ = self.sessions.close_session(&self.id).await;
                return None;
            }
        };
        if let Some(message) = &message {
            self.received(message);
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
