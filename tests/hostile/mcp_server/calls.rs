//! Calls running at once in one session: past `McpServerLimits::max_calls_per_session` a
//! `tools/call` is answered at once with `isError`, its tool never runs, and a call that ends
//! or is cancelled frees its place. Over stdio and over HTTP, where the limit is per session.

use super::*;

const SETTING: &str = "McpServerLimits::max_calls_per_session";

/// A `tools/call` answered with `isError` whose text names the setting and the limit.
fn assert_refused(answer: &Value, id: u64, limit: usize) {
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(SETTING), "{text}");
    assert!(text.contains(&format!("{limit} calls")), "{text}");
}

#[test]
fn over_stdio_a_call_past_max_calls_per_session_is_refused_until_one_ends() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Notify::new());
        let calls = Calls::default();
        let server = McpServer::new((hold(events, release.clone()), record(&calls)))
            .limits(McpServerLimits::default().max_calls_per_session(2));
        let mut pipe = Pipe::serve(server);
        pipe.initialize(json!({})).await;
        pipe.send(call_message(2, "hold")).await;
        pipe.send(call_message(3, "hold")).await;
        assert_eq!(seen.recv().await, Some(Held::Started));
        assert_eq!(seen.recv().await, Some(Held::Started));
        // Both places are held: a third call is answered at once, and its tool never runs.
        pipe.send(call_message(4, "record")).await;
        let refused = tokio::time::timeout(Duration::from_secs(5), pipe.next())
            .await
            .expect("the third call is answered at once");
        assert_refused(&refused, 4, 2);
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
        // One call ends: its answer is sent once its place is free, and a new call runs.
        release.notify_one();
        assert_eq!(seen.recv().await, Some(Held::Finished { cancelled: false }));
        let ended = pipe.next().await;
        assert_eq!(ended["result"]["content"][0]["text"], "released", "{ended}");
        pipe.send(call_message(5, "record")).await;
        let ran = pipe.next().await;
        assert_eq!(ran["id"], 5, "{ran}");
        assert_eq!(ran["result"]["content"][0]["text"], "recorded", "{ran}");
        assert_eq!(calls.lock().unwrap().len(), 1);
        // Both places are taken again; cancelling one call frees its place. A cancelled request
        // is not answered (MCP), so the client sees the place free by trying.
        pipe.send(call_message(6, "hold")).await;
        assert_eq!(seen.recv().await, Some(Held::Started));
        let running = if ended["id"] == 2 { 3 } else { 2 };
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": running}});
        pipe.send(cancel).await;
        assert_eq!(seen.recv().await, Some(Held::Stopped));
        let retried = async {
            for id in 7.. {
                pipe.send(call_message(id, "record")).await;
                let answer = pipe.next().await;
                if answer["result"]["isError"] != true {
                    assert_eq!(answer["result"]["content"][0]["text"], "recorded");
                    break;
                }
                assert_refused(&answer, id, 2);
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), retried)
            .await
            .expect("a place is free once the cancelled call has ended");
        assert_eq!(calls.lock().unwrap().len(), 2, "refused calls never ran");
    });
}

#[test]
fn over_stdio_the_default_max_calls_per_session_is_64() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let calls = Calls::default();
        let server = McpServer::new((hold(events, Arc::default()), record(&calls)));
        let mut pipe = Pipe::serve(server);
        pipe.initialize(json!({})).await;
        for id in 0..64 {
            pipe.send(call_message(100 + id, "hold")).await;
        }
        for _ in 0..64 {
            assert_eq!(seen.recv().await, Some(Held::Started));
        }
        pipe.send(call_message(2, "record")).await;
        let refused = tokio::time::timeout(Duration::from_secs(5), pipe.next())
            .await
            .expect("the 65th call is answered at once");
        assert_refused(&refused, 2, 64);
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
    });
}

#[test]
fn over_http_max_calls_per_session_holds_per_session_and_a_call_that_ends_frees_its_place() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Notify::new());
        let calls = Calls::default();
        let server = McpServer::new((hold(events, release.clone()), record(&calls)))
            .limits(McpServerLimits::default().max_calls_per_session(2));
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let full = open_session(&client, addr).await;
        let mut held = Vec::new();
        for id in [2, 3] {
            let response = post(
                &client,
                addr,
                Some(&full),
                call_message(id, "hold").to_string(),
            )
            .send()
            .await
            .unwrap();
            held.push((id, response));
        }
        assert_eq!(seen.recv().await, Some(Held::Started));
        assert_eq!(seen.recv().await, Some(Held::Started));
        let response = post(
            &client,
            addr,
            Some(&full),
            call_message(4, "record").to_string(),
        )
        .send()
        .await
        .unwrap();
        let refused = tokio::time::timeout(Duration::from_secs(5), answer(response, 4))
            .await
            .expect("the third call is answered at once");
        assert_refused(&refused, 4, 2);
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
        // Another session has places of its own.
        let other = open_session(&client, addr).await;
        assert_eq!(
            call_text(&client, addr, &other, 2, "record").await,
            "recorded"
        );
        // One call ends (its answer is read whole): a new call of the full session runs.
        release.notify_one();
        assert_eq!(seen.recv().await, Some(Held::Finished { cancelled: false }));
        let (third, second) = (held.pop().unwrap(), held.pop().unwrap());
        let ended = tokio::select! {
            ended = answer(second.1, second.0) => ended,
            ended = answer(third.1, third.0) => ended,
        };
        assert_eq!(ended["result"]["content"][0]["text"], "released", "{ended}");
        assert_eq!(
            call_text(&client, addr, &full, 5, "record").await,
            "recorded"
        );
        assert_eq!(calls.lock().unwrap().len(), 2);
        http_server.shutdown().await;
    });
}
