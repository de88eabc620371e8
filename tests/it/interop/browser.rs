//! A headless Chromium for the interop tests, driven over WebDriver (fantoccini) through the
//! chromedriver `interop/chromium.sh` starts: sessions that close when a test fails too, waits
//! with a deadline, the HTTP status of the page shown, and a page served in-process.
//!
//! Run by `interop/run.sh` (`--ignored`); without `PHASEO_INTEROP_WEBDRIVER_URL` a test fails,
//! never passes.

// Its helpers serve `inbox_browser`, which is built with the feature `inbox` only.
#![cfg_attr(not(feature = "inbox"), allow(dead_code))]

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use futures::FutureExt;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long a wait for the page lasts before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);

/// The WebDriver server's URL: set by `interop/run.sh`, which starts chromedriver.
pub fn webdriver_url() -> String {
    std::env::var("PHASEO_INTEROP_WEBDRIVER_URL").expect(
        "PHASEO_INTEROP_WEBDRIVER_URL is not set: run the interop suite with interop/run.sh, which \
         starts chromedriver (interop/chromium.sh start)",
    )
}

/// A new browser: its own headless Chromium, its own cookies.
pub async fn browser() -> Client {
    let mut options = json!({
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"],
    });
    if let Ok(binary) = std::env::var("PHASEO_INTEROP_CHROMIUM_BIN") {
        options["binary"] = Value::String(binary);
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("browserName".into(), json!("chrome"));
    capabilities.insert("goog:chromeOptions".into(), options);
    let url = webdriver_url();
    // A browser that exits while it starts (seen once in a dozen under a load of 6 on two cores:
    // "Chrome instance exited") is started again, twice at most; the third failure fails the test.
    let mut attempt = 1;
    loop {
        match ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return client,
            Err(e) if attempt < 3 => {
                eprintln!("WebDriver session {attempt} from {url} failed ({e}); starting another");
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("no WebDriver session from {url} after {attempt} attempts: {e}"),
        }
    }
}

/// Runs `scenario` with `n` browsers and closes every one of them afterwards, also when the
/// scenario fails (a session left open keeps its Chromium running).
pub async fn with_browsers<F, Fut>(n: usize, scenario: F)
where
    F: FnOnce(Vec<Client>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        clients.push(browser().await);
    }
    let outcome = AssertUnwindSafe(scenario(clients.clone()))
        .catch_unwind()
        .await;
    for client in clients {
        let _ = client.close().await;
    }
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The first element matching `css`, waited for.
pub async fn find(client: &Client, css: &str) -> Element {
    match client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
    {
        Ok(element) => element,
        Err(e) => panic!(
            "no `{css}` on {} within {WAIT:?} ({e}); the page:\n{}",
            url(client).await,
            body_text(client).await
        ),
    }
}

/// Every element matching `css` now (no wait).
pub async fn find_all(client: &Client, css: &str) -> Vec<Element> {
    client
        .find_all(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("find_all `{css}`: {e}"))
}

/// The text of the first element matching `css`, waited for.
pub async fn text(client: &Client, css: &str) -> String {
    find(client, css)
        .await
        .text()
        .await
        .expect("an element's text")
}

/// Opens `url` in the browser.
pub async fn goto(client: &Client, url: &str) {
    client
        .goto(url)
        .await
        .unwrap_or_else(|e| panic!("goto {url}: {e}"));
}

/// The page's address, as a string.
pub async fn url(client: &Client) -> String {
    client
        .current_url()
        .await
        .map(|u| u.to_string())
        .unwrap_or_else(|e| format!("(no URL: {e})"))
}

/// The page's path (without the query).
pub async fn path(client: &Client) -> String {
    client
        .current_url()
        .await
        .map(|u| u.path().to_owned())
        .expect("the current URL")
}

/// The visible text of the page (for failure messages).
pub async fn body_text(client: &Client) -> String {
    match client.find(Locator::Css("body")).await {
        Ok(body) => body.text().await.unwrap_or_default(),
        Err(e) => format!("(no body: {e})"),
    }
}

/// The HTTP status of the document shown, as the browser received it (Navigation Timing's
/// `responseStatus`): after a form post that rendered a page, that page's status; after a
/// redirect, the status of the page redirected to.
pub async fn status(client: &Client) -> u16 {
    let value = client
        .execute(
            "return performance.getEntriesByType('navigation')[0].responseStatus;",
            vec![],
        )
        .await
        .expect("the page's status");
    value
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or_else(|| panic!("no response status: {value}"))
}

/// Waits until `check` holds, polling; panics with `what` after [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Serves `app` on 127.0.0.1, on a port of its own; returns `http://127.0.0.1:PORT`. The server
/// ends with the test's runtime.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port on 127.0.0.1");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the test server");
    });
    format!("http://{addr}")
}

/// The harness itself, on a bare page: Chromium reaches a server in this process, fills in and
/// posts a form, runs a script, reports the status of what it shows, and takes a screenshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromedriver: run by interop/run.sh"]
async fn browser_posts_a_form_to_a_page_served_in_process() {
    use axum::response::{Html, IntoResponse};
    use axum::routing::get;

    async fn form() -> Html<&'static str> {
        Html(
            "<!doctype html><title>harness</title><form method=post>\
             <input name=word><button id=send>Send</button></form>",
        )
    }
    async fn posted(axum::Form(fields): axum::Form<Vec<(String, String)>>) -> impl IntoResponse {
        let word = fields
            .into_iter()
            .find(|(k, _)| k == "word")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let body = format!("<!doctype html><p id=got>{}</p>", word.replace('<', "&lt;"));
        (axum::http::StatusCode::CONFLICT, Html(body))
    }
    let base = serve(axum::Router::new().route("/", get(form).post(posted))).await;

    with_browsers(1, |clients| async move {
        let client = &clients[0];
        goto(client, &format!("{base}/")).await;
        assert_eq!(status(client).await, 200);
        find(client, "input[name=word]")
            .await
            .send_keys("hello <b>")
            .await
            .unwrap();
        find(client, "#send").await.click().await.unwrap();
        assert_eq!(text(client, "#got").await, "hello <b>");
        assert_eq!(
            status(client).await,
            409,
            "the status of the posted form's answer"
        );
        let png = client.screenshot().await.expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
    })
    .await;
}
