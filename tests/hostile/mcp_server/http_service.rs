//! `McpServer::http_service()` mounted in a plain hyper server of the test's own (as a user would
//! mount it in axum or hyper): each check `serve_http` makes on a request is made by the service
//! itself. (Its Origin check: `a_foreign_origin_gets_403_from_http_service_in_another_server`.)

use super::*;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;

/// A hyper HTTP/1 server of the test's own, with no limits of its own, serving `server`'s
/// `http_service()` on a free port of 127.0.0.1 until the task is aborted.
async fn mount(server: McpServer) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let service = server.http_service().expect("the service");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = TowerToHyperService::new(service.clone());
            connections.spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
            while connections.try_join_next().is_some() {}
        }
    });
    (addr, serving)
}

#[test]
fn past_max_sessions_http_service_answers_503_naming_the_setting() {
    case(Duration::from_secs(30), || async {
        let limits = McpServerLimits::default().max_sessions(2);
        let (addr, serving) = mount(McpServer::new(record(&Calls::default())).limits(limits)).await;
        let client = http();
        for _ in 0..2 {
            open_session(&client, addr).await;
        }
        let refused = post(&client, addr, None, initialize_message().to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 503);
        let retry = refused.headers().get("retry-after").expect("a Retry-After");
        let seconds: u64 = retry.to_str().unwrap().parse().unwrap();
        assert!((1..=300).contains(&seconds), "Retry-After: {seconds}");
        let text = refused.text().await.unwrap();
        assert!(text.contains("McpServerLimits::max_sessions"), "{text}");
        serving.abort();
    });
}

#[test]
fn a_slow_body_gets_408_from_http_service_naming_the_setting() {
    case(Duration::from_secs(30), || async {
        let calls = Calls::default();
        let wait = Duration::from_millis(300);
        let limits = McpServerLimits::default().body_read_timeout(wait);
        let (addr, serving) = mount(McpServer::new(record(&calls)).limits(limits)).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\
            Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
            Content-Length: 1000\r\n\r\n{\"jsonrpc\":";
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = Instant::now();
        // The server of the test has no time limit of its own: only the service's can answer.
        let seen = tokio::time::timeout(Duration::from_secs(10), until_closed(&mut stream))
            .await
            .expect("an answer within 10 s to a body that never ends");
        assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
        assert!(
            seen.contains("McpServerLimits::body_read_timeout"),
            "{seen}"
        );
        assert!(started.elapsed() >= wait);
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
        serving.abort();
    });
}

#[test]
fn an_oversized_body_gets_413_from_http_service_naming_the_setting() {
    case(Duration::from_secs(30), || async {
        oversized_bodies_are_refused(|server| async move {
            let (addr, serving) = mount(server).await;
            (addr, async move { serving.abort() })
        })
        .await;
    });
}
