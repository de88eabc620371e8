//! The start and the end of a session over a byte stream (stdio), where rmcp's own handling is
//! stricter or slower than MCP's lifecycle asks.
//!
//! - Before `initialize`, rmcp ends the session at the first message that is not a request (a
//!   stray notification ends the server). MCP only says a client SHOULD NOT send one, and a
//!   notification asks for no answer: it is dropped here. A request other than `initialize` or
//!   `ping` is answered with a JSON-RPC error (`-32600`), and the session waits on.
//! - At the end of the input (the client closed stdin, or went away), rmcp lets running calls go
//!   on for up to 5 s, waiting to send answers nobody will read. `gone` fires at once instead,
//!   and the handler cancels the session's calls with it.

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio_util::sync::CancellationToken;

/// What the client is told when it asks something before `initialize`.
const NOT_INITIALIZED: &str =
    "the session is not initialised: send `initialize` first (only `ping` may come before it)";

/// A transport whose client may misbehave before `initialize`, and whose end fires `gone`.
pub(crate) struct Lifecycle<T> {
    inner: T,
    initialized: bool,
    gone: CancellationToken,
}

impl<T> Lifecycle<T> {
    pub(crate) fn new(inner: T, gone: CancellationToken) -> Self {
        Lifecycle {
            inner,
            initialized: false,
            gone,
        }
    }
}

impl<T: Transport<RoleServer> + 'static> Transport<RoleServer> for Lifecycle<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(message) = self.inner.receive().await else {
                // Nobody is left to read an answer: the session's calls stop now.
                self.gone.cancel();
                return None;
            };
            if self.initialized {
                return Some(message);
            }
            let ClientJsonRpcMessage::Request(request) = &message else {
                // A notification, or an answer to a request never sent: nothing to do.
                continue;
            };
            match &request.request {
                ClientRequest::InitializeRequest(_) => {
                    self.initialized = true;
                    return Some(message);
                }
                ClientRequest::PingRequest(_) => return Some(message),
                _ => {
                    let error = ErrorData::invalid_request(NOT_INITIALIZED, None);
                    let refusal = ServerJsonRpcMessage::error(error, Some(request.id.clone()));
                    // A client that cannot be written to ends its session at its next read.
                    let _ = self.inner.send(refusal).await;
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
