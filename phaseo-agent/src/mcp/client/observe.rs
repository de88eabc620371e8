//! The server's progress, routed to the call it belongs to: a transport wrapper that reads each
//! message as it arrives, in order.
//!
//! rmcp hands notifications to the client's handler on tasks of their own, so a progress
//! notification could reach a handler after the call's result reached the caller. Reading them off
//! the transport instead keeps the server's order: every progress notification a server sent
//! before its result is published before the call returns.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{
    JsonRpcMessage, ProgressNotificationParam, ProgressToken, RequestId, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Map, Value};

use crate::limits::{Limit, LimitExceeded, McpClientLimits};
use crate::tool::context::ToolContext;

/// How many progress tokens no call has claimed yet are followed at once. A call's request is on
/// its way before the call registers its token, so the server's first notifications may come
/// first: they are kept and counted under the call's own limits, and published when it
/// registers. Only a server that sends progress for tokens no call is waiting for fills this;
/// past it, the oldest such token is forgotten.
const EARLY_TOKENS: usize = 64;

/// Where each progress token's notifications go: the context of the call that sent the request;
/// and which requests were answered with more than the limits allow.
pub(crate) struct Router {
    routes: Mutex<Routes>,
    limits: McpClientLimits,
    /// Set when the connection was ended because the server went over a limit: every request
    /// still waiting fails with it.
    broken: OnceLock<LimitExceeded>,
    /// Requests whose answer went over a limit (and was replaced by an error): their calls fail
    /// with it.
    oversized: Mutex<HashMap<RequestId, LimitExceeded>>,
}

impl Default for Router {
    fn default() -> Self {
        Router::new(McpClientLimits::default())
    }
}

#[derive(Default)]
struct Routes {
    live: HashMap<ProgressToken, Route>,
    /// The tokens of `live` whose call has not registered yet, oldest first.
    early: VecDeque<ProgressToken>,
}

/// One call's progress so far: what was kept, and what was only counted.
#[derive(Default)]
struct Route {
    /// The call's context, once it registered; until then, what is kept waits in `queued`.
    ctx: Option<ToolContext>,
    queued: Vec<ProgressNotificationParam>,
    kept: usize,
    bytes: usize,
    /// Notifications counted and not kept, the limit that stopped the keeping, and the last of
    /// them (its `progress` and `total`).
    dropped: usize,
    hit: Option<LimitExceeded>,
    last: Option<(f64, Option<f64>)>,
}

impl Route {
    /// Whether a notification of `size` bytes is kept; if not, it is counted.
    fn admit(
        &mut self,
        limits: &McpClientLimits,
        params: &ProgressNotificationParam,
        size: usize,
    ) -> bool {
        if self.hit.is_none() {
            if self.kept >= limits.progress_per_call() {
                self.hit = Some(LimitExceeded::count(
                    Limit::ProgressPerCall,
                    limits.progress_per_call(),
                ));
            } else if size > limits.progress_bytes().saturating_sub(self.bytes) {
                self.hit = Some(LimitExceeded::count(
                    Limit::ProgressBytes,
                    limits.progress_bytes(),
                ));
            }
        }
        if self.hit.is_some() {
            self.dropped += 1;
            self.last = Some((params.progress, params.total));
            return false;
        }
        self.kept += 1;
        self.bytes += size;
        true
    }
}

impl Router {
    /// A router that keeps at most `limits`' progress per call.
    pub(crate) fn new(limits: McpClientLimits) -> Self {
        Router {
            routes: Mutex::default(),
            limits,
            broken: OnceLock::new(),
            oversized: Mutex::default(),
        }
    }

    /// Routes `token`'s progress to `ctx`, starting with what arrived before this call (kept and
    /// counted under the same limits).
    pub(crate) fn register(&self, token: ProgressToken, ctx: ToolContext) {
        let queued = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            routes.early.retain(|early| *early != token);
            let route = routes.live.entry(token).or_default();
            route.ctx = Some(ctx.clone());
            std::mem::take(&mut route.queued)
        };
        for params in &queued {
            publish(&ctx, params);
        }
    }

    /// Stops routing `token` (its call is over). When some of its progress was only counted,
    /// one last progress value says how many, and the setting that keeps more.
    pub(crate) fn unregister(&self, token: &ProgressToken) {
        let route = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            routes.live.remove(token)
        };
        let Some(Route {
            ctx: Some(ctx),
            hit: Some(hit),
            last: Some((progress, total)),
            dropped,
            ..
        }) = route
        else {
            return;
        };
        {
            let mut summary = ProgressNotificationParam::new(token.clone(), progress);
            summary.total = total;
            summary.message = Some(format!(
                "{dropped} more progress notifications were counted, not kept: {hit}"
            ));
            publish(&ctx, &summary);
        }
    }

    fn progress(&self, params: &ProgressNotificationParam) {
        // A message longer than the byte limit is never kept: its length is enough to know.
        let message = params.message.as_ref().map_or(0, String::len);
        let size = if message > self.limits.progress_bytes() {
            message
        } else {
            json_size(params)
        };
        let ctx = {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            let routes = &mut *routes;
            let token = &params.progress_token;
            if !routes.live.contains_key(token) {
                if routes.early.len() >= EARLY_TOKENS {
                    if let Some(oldest) = routes.early.pop_front() {
                        routes.live.remove(&oldest);
                    }
                }
                routes.early.push_back(token.clone());
                routes.live.insert(token.clone(), Route::default());
            }
            let Some(route) = routes.live.get_mut(token) else {
                return;
            };
            if !route.admit(&self.limits, params, size) {
                return;
            }
            match &route.ctx {
                Some(ctx) => ctx.clone(),
                None => {
                    route.queued.push(params.clone());
                    return;
                }
            }
        };
        publish(&ctx, params);
    }

    /// The connection ends because the server went over `limit`: requests waiting fail with it.
    pub(crate) fn break_with(&self, limit: LimitExceeded) {
        let _ = self.broken.set(limit);
    }

    /// The answer to `id` went over `limit` (and was replaced by an error).
    pub(crate) fn oversized(&self, id: RequestId, limit: LimitExceeded) {
        let mut oversized = self
            .oversized
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        oversized.insert(id, limit);
    }

    /// The limit the server went over, when the connection was ended for it.
    pub(crate) fn broken(&self) -> Option<LimitExceeded> {
        self.broken.get().cloned()
    }

    /// The limit a failed request `id` went over, if that is why it failed.
    pub(crate) fn exceeded(&self, id: &RequestId) -> Option<LimitExceeded> {
        let mut oversized = self
            .oversized
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        oversized.remove(id).or_else(|| self.broken.get().cloned())
    }
}

/// The length of a value's JSON text, counted without writing it anywhere.
pub(crate) fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and the model types always serialise.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
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
                self.router.progress(&progress.params);
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
        router.progress(&early);
        router.progress(&ProgressNotificationParam::new(
            ProgressToken(rmcp::model::NumberOrString::Number(8)),
            1.0,
        ));
        let ctx = ToolContext::detached();
        router.register(token.clone(), ctx.clone());
        router.progress(&ProgressNotificationParam::new(token.clone(), 2.0));
        router.unregister(&token);
        router.progress(&ProgressNotificationParam::new(token, 3.0));
        assert_eq!(
            ctx.progress(),
            [
                json!({"progress": 1, "message": "queued"}),
                json!({"progress": 2})
            ]
        );
    }
}

#[cfg(test)]
mod caps {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_past_the_limits_is_counted_and_the_count_is_the_last_value() {
        let router = Router::new(McpClientLimits::default().max_progress_per_call(2));
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        let ctx = ToolContext::detached();
        router.register(token.clone(), ctx.clone());
        for i in 1..=5 {
            router.progress(&ProgressNotificationParam::new(token.clone(), f64::from(i)));
        }
        router.unregister(&token);
        let progress = ctx.progress();
        assert_eq!(progress.len(), 3, "{progress:?}");
        assert_eq!(progress[1], json!({"progress": 2}));
        assert_eq!(progress[2]["progress"], json!(5));
        let message = progress[2]["message"].as_str().unwrap();
        assert!(
            message.starts_with("3 more progress notifications were counted"),
            "{message}"
        );
        assert!(
            message.contains("McpClientLimits::max_progress_per_call"),
            "{message}"
        );
    }

    #[test]
    fn progress_before_the_call_registers_is_counted_not_lost() {
        // A busy client registers its token late: what came first is kept and counted under the
        // call's own limits, none of it dropped without a count.
        let router = Router::new(McpClientLimits::default().max_progress_per_call(100));
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        for i in 1..=300 {
            router.progress(&ProgressNotificationParam::new(token.clone(), f64::from(i)));
        }
        let ctx = ToolContext::detached();
        router.register(token.clone(), ctx.clone());
        router.unregister(&token);
        let progress = ctx.progress();
        assert_eq!(progress.len(), 101, "{progress:?}");
        assert_eq!(progress[99], json!({"progress": 100}));
        let message = progress[100]["message"].as_str().unwrap();
        assert!(message.starts_with("200 more"), "{message}");
    }

    #[test]
    fn progress_for_tokens_no_call_claims_is_bounded() {
        let router = Router::new(McpClientLimits::default());
        for t in 0..10_000 {
            let token = ProgressToken(rmcp::model::NumberOrString::Number(t));
            router.progress(&ProgressNotificationParam::new(token, 1.0));
        }
        let routes = router.routes.lock().unwrap();
        assert_eq!(routes.live.len(), EARLY_TOKENS);
        assert_eq!(routes.early.len(), EARLY_TOKENS);
    }

    #[test]
    fn one_notification_larger_than_the_byte_limit_is_never_kept() {
        let router = Router::new(McpClientLimits::default().max_progress_bytes(100));
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        let mut big = ProgressNotificationParam::new(token.clone(), 1.0);
        big.message = Some("x".repeat(1000));
        router.progress(&big);
        let ctx = ToolContext::detached();
        router.register(token.clone(), ctx.clone());
        router.progress(&big);
        router.unregister(&token);
        let progress = ctx.progress();
        assert_eq!(progress.len(), 1, "only the count: {progress:?}");
        assert!(
            progress[0]["message"]
                .as_str()
                .unwrap()
                .contains("max_progress_bytes")
        );
    }
}
