//! The server's progress, routed to the call it belongs to: a transport wrapper that reads each
//! message as it arrives, in order.
//!
//! rmcp hands notifications to the client's handler on tasks of their own, so a progress
//! notification could reach a handler after the call's result reached the caller. Reading them off
//! the transport instead keeps the server's order: every progress notification a server sent
//! before its result is published before the call returns.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ProgressToken, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Map, Value};

use crate::tool::context::ToolContext;

/// How many progress notifications for a token no call has claimed yet are kept (the request is
/// on its way while its call registers the token); the oldest go first.
const EARLY_KEPT: usize = 64;

/// Where each progress token's notifications go: the context of the call that sent the request.
#[derive(Default)]
pub(crate) struct Router {
    routes: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    live: HashMap<ProgressToken, ToolContext>,
    early: VecDeque<ProgressNotificationParam>,
}

impl Router {
    /// Routes `token`'s progress to `ctx`, starting with what arrived before this call.
    pub(crate) fn register(&self, token: ProgressToken, ctx: ToolContext) {
        let early = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            let (mine, rest): (VecDeque<_>, VecDeque<_>) = routes
                .early
                .drain(..)
                .partition(|p| p.progress_token == token);
            routes.early = rest;
            routes.live.insert(token, ctx.clone());
            mine
        };
        for params in &early {
            publish(&ctx, params);
        }
    }

    /// Stops routing `token` (its call is over).
    pub(crate) fn unregister(&self, token: &ProgressToken) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.live.remove(token);
    }

    fn progress(&self, params: ProgressNotificationParam) {
        let ctx = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.live.get(&params.progress_token) {
                Some(ctx) => ctx.clone(),
                None => {
                    if routes.early.len() == EARLY_KEPT {
                        routes.early.pop_front();
                    }
                    routes.early.push_back(params);
                    return;
                }
            }
        };
        publish(&ctx, &params);
    }
}

/// A progress notification as the tool's preliminary result: `{"progress": 2, "total": 5,
/// "message": "..."}`, `total` and `message` only when the server sent them.
fn publish(ctx: &ToolContext, params: &ProgressNotificationParam) {
    let mut value = Map::new();
    value.insert("progress".into(), number(params.progress));
    if let Some(total) = params.total {
        value.insert("total".into(), number(total));
    }
    if let Some(message) = &params.message {
        value.insert("message".into(), Value::String(message.clone()));
    }
    // A value the tool's event validators refuse is recorded on the context, and the call fails
    // with it when it ends (as for a tool of this process).
    let _ = ctx.emit_progress(Value::Object(value));
}

/// A whole number as an integer (`2`, not `2.0`); others as they are.
fn number(n: f64) -> Value {
    // Below 2^53 a whole `f64` converts to `i64` exactly.
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// A transport whose incoming progress notifications are routed as they are read.
pub(crate) struct Observed<T> {
    pub(crate) inner: T,
    pub(crate) router: Arc<Router>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Observed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(notification) = &message {
            if let ServerNotification::ProgressNotification(progress) = &notification.notification {
                self.router.progress(progress.params.clone());
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_progress_is_an_integer_and_the_rest_is_kept() {
        assert_eq!(number(2.0), json!(2));
        assert_eq!(number(-3.0), json!(-3));
        assert_eq!(number(0.5), json!(0.5));
        assert_eq!(number(1e300), json!(1e300));
        assert_eq!(number(f64::NAN), Value::Null);
    }

    #[test]
    fn progress_that_comes_before_its_call_registers_is_kept_for_it() {
        let router = Router::default();
        let token = ProgressToken(rmcp::model::NumberOrString::Number(7));
        let mut early = ProgressNotificationParam::new(token.clone(), 1.0);
        early.message = Some("queued".into());
        router.progress(early);
        router.progress(ProgressNotificationParam::new(
            ProgressToken(rmcp::model::NumberOrString::Number(8)),
            1.0,
        ));
        let ctx = ToolContext::detached();
        router.register(token.clone(), ctx.clone());
        router.progress(ProgressNotificationParam::new(token.clone(), 2.0));
        router.unregister(&token);
        router.progress(ProgressNotificationParam::new(token, 3.0));
        assert_eq!(
            ctx.progress(),
            [
                json!({"progress": 1, "message": "queued"}),
                json!({"progress": 2})
            ]
        );
    }
}
