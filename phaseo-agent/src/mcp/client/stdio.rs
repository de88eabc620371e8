//! A server started from a command, over its stdio, with each line it writes bounded.
//!
//! rmcp's own child-process transport caps a line at 16 MiB, but drops a longer one quietly and
//! reads on: the request it answered then waits for its timeout, and the cap is not the client's
//! to set. Here the child's stdout goes through [`BoundedLines`] first: a line longer than
//! `max_message_bytes` (or that would cost more memory once parsed than that allows) ends the
//! connection at once, with the limit recorded on the [`Router`], so the requests waiting fail
//! with it; none of the line is kept beyond the read buffer.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::limits::{Limit, LimitExceeded, ParseCost, mcp_parse_cost_exceeded, parse_budget_for};
use crate::mcp::client::observe::Router;

/// A child's stdout as the reading half of a transport.
pub(crate) type Transport = AsyncRwTransport<RoleClient, BoundedLines<ChildStdout>, ChildStdin>;

/// Starts `command` with piped stdin and stdout (stderr passed through), and the transport over
/// them. The child is killed when the returned [`Child`] is dropped.
pub(crate) fn spawn(
    mut command: Command,
    max_line: usize,
    router: Arc<Router>,
) -> io::Result<(Child, Transport)> {
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the child's stdio was not piped"));
    };
    let read = BoundedLines {
        inner: stdout,
        max: max_line,
        line: 0,
        cost: ParseCost::default(),
        over: None,
        router,
    };
    // rmcp's own cap stays above ours (a line may end in `\r\n`), so ours is the one that acts.
    let transport =
        AsyncRwTransport::new_client(read, stdin).with_max_line_length(max_line.saturating_add(2));
    Ok((child, transport))
}

/// A reader that fails once a line (the bytes between two `\n`) is longer than `max`, or would
/// cost more memory once parsed than [`parse_budget_for`] `max`.
///
/// The lines before the long one are passed on whole; the read that crosses the bound is cut at
/// its last line end, and the next read fails.
pub(crate) struct BoundedLines<R> {
    inner: R,
    max: usize,
    /// Bytes of the current line so far.
    line: usize,
    /// What the current line would cost once parsed, so far.
    cost: ParseCost,
    /// The limit a line went over: every read from then on fails with it.
    over: Option<LimitExceeded>,
    router: Arc<Router>,
}

/// The failure of a read past `limit`.
fn failure(limit: &LimitExceeded) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, limit.clone())
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(limit) = &this.over {
            return Poll::Ready(Err(failure(limit)));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let mut whole_lines = 0;
        let budget = parse_budget_for(this.max);
        for (i, &byte) in buf.filled()[before..].iter().enumerate() {
            if byte == b'\n' {
                this.line = 0;
                this.cost = ParseCost::default();
                whole_lines = i + 1;
            } else {
                this.line += 1;
                this.cost.push(byte);
                if this.line > this.max {
                    this.over = Some(LimitExceeded::count(Limit::McpMessageBytes, this.max));
                    break;
                }
                // A line within its size can still cost gigabytes once rmcp parses it
                // (`[[],[],..]` in a result's `structuredContent`): refused the same way, for
                // what it is.
                if this.cost.size() > budget {
                    this.over = Some(mcp_parse_cost_exceeded(this.max));
                    break;
                }
            }
        }
        if let Some(limit) = &this.over {
            this.router.break_with(limit.clone());
            buf.set_filled(before + whole_lines);
            if whole_lines == 0 {
                return Poll::Ready(Err(failure(limit)));
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_before_a_long_one_pass_and_the_long_one_fails() {
        let router = Arc::new(Router::default());
        let mut read = BoundedLines {
            inner: &b"ok\nalso ok\nmuch too long\nnever read\n"[..],
            max: 8,
            line: 0,
            cost: ParseCost::default(),
            over: None,
            router: router.clone(),
        };
        let mut out = Vec::new();
        let err = read.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(out, b"ok\nalso ok\n");
        assert!(
            err.to_string()
                .contains("McpClientLimits::max_message_bytes"),
            "{err}"
        );
        let id = rmcp::model::RequestId::Number(1);
        assert_eq!(
            router.exceeded(&id),
            Some(LimitExceeded::new(Limit::McpMessageBytes, 8))
        );
    }

    #[tokio::test]
    async fn a_line_within_its_size_that_would_cost_too_much_once_parsed_fails_with_that_limit() {
        let max = 1 << 20;
        let mut text = b"ok\n[".to_vec();
        text.extend_from_slice(&b"[],".repeat(max / 4));
        text.extend_from_slice(b"[]]\n");
        let router = Arc::new(Router::default());
        let mut read = BoundedLines {
            inner: &text[..],
            max,
            line: 0,
            cost: ParseCost::default(),
            over: None,
            router: router.clone(),
        };
        let mut out = Vec::new();
        let err = read.read_to_end(&mut out).await.unwrap_err();
        // The reads before the one that crosses the bound were passed on: not the whole line.
        assert!(out.starts_with(b"ok\n") && out.len() < text.len());
        assert_eq!(
            err.to_string(),
            "a message from the MCP server costs more memory to parse than the limit of 67108864 \
             bytes (raise it with `McpClientLimits::max_message_bytes`)"
        );
        let id = rmcp::model::RequestId::Number(1);
        assert_eq!(
            router.exceeded(&id),
            Some(LimitExceeded::new(Limit::McpMessageParseCost, 64 << 20))
        );
    }
}
