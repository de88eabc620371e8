//! Which web pages may call the server: the `Origin` check of [`McpHttpService`](super::McpHttpService).
//!
//! A browser sends `Origin` on a cross-site request; a program usually sends none. A page of
//! this machine is always allowed (`http` or `https`, any port, a host of `localhost`, any
//! address of 127.0.0.0/8, or `[::1]`), as is each of [`McpServer::allowed_origins`]. rmcp's own
//! check matches exact hosts only (`127.0.0.2` is refused) and lets an entry without a port match
//! every port; this one follows the origin rules (RFC 6454): an entry without a port is the
//! origin of the scheme's default port, as a browser sends it.
//!
//! [`McpServer::allowed_origins`]: crate::mcp::server::McpServer::allowed_origins

use std::net::{Ipv4Addr, Ipv6Addr};

use hyper::header::HeaderValue;
use hyper::http::Uri;

/// The origins a server allows besides the loopback ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origins {
    allowed: Vec<Allowed>,
}

/// One entry of [`McpServer::allowed_origins`](crate::mcp::server::McpServer::allowed_origins).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    /// `null`: sandboxed pages and local files.
    Null,
    /// A scheme and a host, any port (written `:*`).
    AnyPort(Site),
    /// A scheme, a host and a port (the scheme's default one when none is written; `None` for a
    /// scheme without one).
    Exact(Site, Option<u16>),
}

/// An origin's scheme and host, lowercase (an IPv6 host in its brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Site {
    scheme: String,
    host: String,
}

/// An origin as a browser sends it.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    Null,
    /// A scheme, a host, and the port (the scheme's default one when none is written; `None`
    /// for a scheme without one).
    Site(Site, Option<u16>),
}

impl Origins {
    /// The loopback origins, and these entries (`https://app.example.com:443`,
    /// `http://intranet.local:*`, `null`); an entry that is not an origin matches nothing.
    pub(crate) fn new(entries: &[String]) -> Self {
        let allowed = entries.iter().filter_map(|raw| allowed(raw)).collect();
        Origins { allowed }
    }

    /// Whether a request with this `Origin` header (or none) may be served.
    pub(crate) fn allow(&self, header: Option<&HeaderValue>) -> bool {
        let Some(header) = header else {
            // Not sent by a page: the check is against pages.
            return true;
        };
        let Some(origin) = header.to_str().ok().and_then(origin) else {
            return false;
        };
        if let Origin::Site(site, _) = &origin {
            if is_loopback(site) {
                return true;
            }
        }
        self.allowed.iter().any(|allowed| match (allowed, &origin) {
            (Allowed::Null, Origin::Null) => true,
            (Allowed::AnyPort(a), Origin::Site(o, _)) => a == o,
            (Allowed::Exact(a, port), Origin::Site(o, theirs)) => a == o && port == theirs,
            _ => false,
        })
    }
}

/// A page served from this machine.
fn is_loopback(site: &Site) -> bool {
    if site.scheme != "http" && site.scheme != "https" {
        return false;
    }
    let host = site.host.as_str();
    if host == "localhost" {
        return true;
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    }
    host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The port a scheme implies when an origin does not write one.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// An `Origin` header's value: `null`, or `scheme://host[:port]` and nothing else (no path, no
/// user).
fn origin(value: &str) -> Option<Origin> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri: Uri = value.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let bare = uri.path_and_query().is_none_or(|p| p.as_str() == "/");
    if !bare || authority.as_str().contains('@') || authority.host().is_empty() {
        return None;
    }
    let port = authority.port_u16().or_else(|| default_port(&scheme));
    let host = authority.host().to_ascii_lowercase();
    Some(Origin::Site(Site { scheme, host }, port))
}

/// An entry of the allowed list: an origin, or one ending in `:*` for any port.
fn allowed(raw: &str) -> Option<Allowed> {
    let raw = raw.trim();
    if let Some(base) = raw.strip_suffix(":*") {
        // `http://[::1]:*`: the base must have no port of its own.
        let uri: Uri = base.parse().ok()?;
        if uri.port().is_some() {
            return None;
        }
        let Origin::Site(site, _) = origin(base)? else {
            return None;
        };
        return Some(Allowed::AnyPort(site));
    }
    Some(match origin(raw)? {
        Origin::Null => Allowed::Null,
        Origin::Site(site, port) => Allowed::Exact(site, port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(entries: &[&str], value: &str) -> bool {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        Origins::new(&entries).allow(Some(&HeaderValue::from_str(value).unwrap()))
    }

    #[test]
    fn loopback_pages_are_allowed_and_look_alikes_are_not() {
        for local in [
            "http://localhost",
            "https://LOCALHOST:8443",
            "http://127.0.0.1:5173",
            "http://127.9.8.7",
            "https://[::1]:3000",
            "http://[0:0:0:0:0:0:0:1]",
        ] {
            assert!(allows(&[], local), "{local}");
        }
        for foreign in [
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://128.0.0.1",
            "http://[::2]",
            "ws://localhost",
            "http://evil.example@localhost",
            "http://localhost/path",
            "localhost",
            "null",
            "",
        ] {
            assert!(!allows(&[], foreign), "{foreign}");
        }
    }

    #[test]
    fn an_entry_matches_its_scheme_host_and_port() {
        let entries = [
            "https://app.example.com",
            "http://intranet.local:*",
            "https://admin.example.com:8443",
            "chrome-extension://abcdef",
        ];
        for allowed in [
            "https://app.example.com",
            "https://app.example.com:443",
            "https://App.Example.com",
            "http://intranet.local",
            "http://intranet.local:9000",
            "https://admin.example.com:8443",
            "chrome-extension://abcdef",
        ] {
            assert!(allows(&entries, allowed), "{allowed}");
        }
        for refused in [
            "https://app.example.com:8443",
            "http://app.example.com",
            "https://intranet.local",
            "https://admin.example.com",
            "null",
        ] {
            assert!(!allows(&entries, refused), "{refused}");
        }
        assert!(allows(&["null"], "null"));
        assert!(Origins::default().allow(None), "no Origin: not a page");
    }
}
