//! A model server that misbehaves on purpose: HTTP/1.1 written by hand over a tokio
//! `TcpListener`, so a response can be anything (endless bodies, one huge event, silence,
//! trickled bytes, wrong lengths, redirects).
//!
//! Each connection carries one request and one response (`connection: close`). The server
//! counts the connections it accepted, the requests it read in full and the bytes its responses
//! got into the socket, so a test can tell what reached it and what the client took.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running server; it stops when dropped.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    counts: Arc<Counts>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: AtomicUsize,
    sent: AtomicU64,
    heads: std::sync::Mutex<Vec<String>>,
}

impl Server {
    /// Connections accepted.
    pub fn connections(&self) -> usize {
        self.counts.connections.load(Ordering::SeqCst)
    }

    /// Requests read in full.
    pub fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Bytes of responses the socket accepted (what the client read, plus the kernel's buffers).
    pub fn sent(&self) -> u64 {
        self.counts.sent.load(Ordering::SeqCst)
    }

    /// The request line and headers of each request read.
    pub fn heads(&self) -> Vec<String> {
        self.counts.heads.lock().expect("heads").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The writing half of a connection, counting what it writes.
pub struct Out {
    stream: TcpStream,
    counts: Arc<Counts>,
}

impl Out {
    /// Writes all of `bytes`; an error means the client went away.
    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.counts
            .sent
            .fetch_add(bytes.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    /// A status line and headers (`connection: close` added), then the blank line.
    pub async fn head(&mut self, status: &str, headers: &[(&str, &str)]) -> std::io::Result<()> {
        let mut head = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        self.send(head.as_bytes()).await
    }

    /// A whole response with a `content-length`.
    pub async fn whole(
        &mut self,
        status: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<()> {
        let length = body.len().to_string();
        let mut all = headers.to_vec();
        all.push(("content-length", &length));
        self.head(status, &all).await?;
        self.send(body).await
    }

    /// Writes `piece` over and over until the client goes away (or `limit` bytes went out).
    pub async fn repeat(&mut self, piece: &[u8], limit: u64) -> std::io::Result<()> {
        let mut written = 0;
        while written < limit {
            self.send(piece).await?;
            written += piece.len() as u64;
        }
        Ok(())
    }

    /// Waits until the client closes the connection (or forever).
    pub async fn hold(&mut self) {
        let mut byte = [0u8; 1];
        while let Ok(n) = self.stream.read(&mut byte).await {
            if n == 0 {
                break;
            }
        }
    }
}

/// Starts a server; `respond(n, out)` answers its `n`th request (from 0).
pub async fn start<F, Fut>(respond: F) -> Server
where
    F: Fn(usize, Out) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let counts = Arc::new(Counts::default());
    let respond = Arc::new(respond);
    let accept = {
        let counts = counts.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counts.connections.fetch_add(1, Ordering::SeqCst);
                let counts = counts.clone();
                let respond = respond.clone();
                tokio::spawn(async move {
                    let Some(head) = read_request(&mut stream).await else {
                        return;
                    };
                    let n = counts.requests.fetch_add(1, Ordering::SeqCst);
                    counts.heads.lock().expect("heads").push(head);
                    respond(n, Out { stream, counts }).await;
                });
            }
        })
    };
    Server {
        url,
        counts,
        accept,
    }
}

/// Reads one request (its head, and a body of `content-length` bytes); returns the head.
async fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 8192];
    let end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut piece).await.ok()?;
        if n == 0 || buffer.len() > 1 << 20 {
            return None;
        }
        buffer.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut have = buffer.len() - end;
    while have < length {
        let n = stream.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        have += n;
    }
    Some(head)
}
