//! [`Inbox`]'s router and its standalone server.

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::sync::Semaphore;

use crate::inbox::decisions::{audit, batch, decide_form, item, link_confirm, link_page};
use crate::inbox::http::{App, script, security_headers, style};
use crate::inbox::routes::{events, list, login, login_page, logout, retry, run_page};
use crate::inbox::settings::Inbox;

impl Inbox {
    /// The inbox as an axum router, to mount anywhere (`Router::new().nest("/inbox", ...)`):
    /// links and redirects follow where it is mounted.
    pub fn router(&self) -> Router {
        let app = Arc::new(App {
            inbox: self.clone(),
            streams: Arc::new(Semaphore::new(self.max_event_streams)),
        });
        Router::new()
            .route("/", get(list))
            .route("/login", get(login_page).post(login))
            .route("/logout", post(logout))
            .route("/events", get(events))
            .route("/runs/{run}", get(run_page))
            .route("/runs/{run}/retry", post(retry))
            .route("/runs/{run}/calls/{call}", get(item).post(decide_form))
            .route("/batch", post(batch))
            .route("/audit", get(audit))
            .route("/link/{token}", get(link_page).post(link_confirm))
            .route("/static/inbox.js", get(script))
            .route("/static/inbox.css", get(style))
            .layer(axum::middleware::map_response(security_headers))
            .with_state(app)
    }

    /// Serves the inbox alone at `addr` until the process ends.
    ///
    /// ```no_run
    /// # use phaseo_agent::inbox::{Inbox, User};
    /// # use phaseo_agent::durable::Runs;
    /// # use phaseo_agent::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("alice-token", User::admin("alice"));
    /// inbox.serve("127.0.0.1:8080").await
    /// # }
    /// ```
    pub async fn serve(&self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.serve_listener(listener).await
    }

    /// Serves the inbox alone on a listener already bound (port 0 picks a free port; read it
    /// with `local_addr` before handing the listener over).
    ///
    /// ```no_run
    /// # use phaseo_agent::inbox::{Inbox, User};
    /// # use phaseo_agent::durable::Runs;
    /// # use phaseo_agent::store::MemoryStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("alice-token", User::admin("alice"));
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// println!("http://{}/", listener.local_addr()?);
    /// inbox.serve_listener(listener).await
    /// # }
    /// ```
    ///
    /// Beside serving, it takes up runs of its agents whose process stopped, at once and then
    /// every [`recover_every`](Self::recover_every)
    /// ([`keep_recovering`](Self::keep_recovering)).
    pub async fn serve_listener(&self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let inbox = self.clone();
        let recovering = tokio::spawn(async move { inbox.keep_recovering().await });
        let served = axum::serve(listener, self.router()).await;
        recovering.abort();
        served
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    use super::*;
    use crate::durable::approvals::User;
    use crate::durable::runs::Runs;
    use crate::store::memory::MemoryStore;

    /// One HTTP/1.1 exchange over a plain socket, the reply lower-cased.
    async fn exchange(addr: SocketAddr, request: String) -> String {
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).unwrap();
            reply.to_ascii_lowercase()
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn links_redirects_and_cookies_follow_where_the_router_is_mounted() {
        let inbox = Inbox::new(Runs::new(MemoryStore::new())).user("t0ken", User::admin("ada"));
        let app = Router::new().nest("/inbox", inbox.router());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let get = |path: &str, cookie: &str| {
            format!("GET {path} HTTP/1.1\r\nhost: x\r\n{cookie}connection: close\r\n\r\n")
        };
        for path in ["/inbox", "/inbox/audit"] {
            let reply = exchange(addr, get(path, "")).await;
            assert!(reply.starts_with("http/1.1 303"), "{reply}");
            assert!(reply.contains("location: /inbox/login\r\n"), "{reply}");
        }
        let form = exchange(addr, get("/inbox/login", "")).await;
        assert!(form.contains("path=/inbox;"), "{form}");
        let nonce = form
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .and_then(|c| c.split(';').next())
            .unwrap()
            .to_owned();
        let csrf = form
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned();
        let fields = format!("token=t0ken&csrf={csrf}");
        let login = format!(
            "POST /inbox/login HTTP/1.1\r\nhost: x\r\ncookie: {nonce}\r\ncontent-type: \
             application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: \
             close\r\n\r\n{fields}",
            fields.len()
        );
        let reply = exchange(addr, login).await;
        assert!(reply.contains("location: /inbox\r\n"), "{reply}");
        assert!(reply.contains("path=/inbox;"), "{reply}");
        let cookie = reply
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .and_then(|c| c.split(';').next())
            .unwrap()
            .to_owned();
        // The cookie's value is hex: lower-casing the reply left it intact.
        let page = exchange(addr, get("/inbox", &format!("cookie: {cookie}\r\n"))).await;
        assert!(page.starts_with("http/1.1 200"), "{page}");
        for link in [
            "href=\"/inbox\"",
            "href=\"/inbox/audit\"",
            "action=\"/inbox\"",
            "src=\"/inbox/static/inbox.js\"",
            "action=\"/inbox/batch\"",
        ] {
            assert!(page.contains(link), "{link} in {page}");
        }
    }
}
