//! A server-sent-events parser that costs time linear in its input and memory bounded by one
//! event.
//!
//! eventsource-stream 0.2 (used before) re-parses its whole buffer from the start on every
//! chunk, so an event delivered in many chunks costs time quadratic in its size, and it keeps any
//! amount; sse-stream 0.2 is linear but bounds nothing and refuses lines the standard says to
//! ignore. This one scans each byte once for a line end, keeps only the unfinished line and the
//! current event, and refuses an event (all its lines, comments included, up to the blank line
//! that ends it) larger than a cap.
//!
//! It follows the WHATWG HTML standard's "event stream interpretation": lines end with CRLF, LF
//! or CR (a CRLF split across two chunks is one line end); a leading BOM is skipped; a line
//! starting with `:` is a comment; `field: value` loses one space after the colon; a line without
//! a colon is a field with an empty value; `data` lines join with `\n`; `event` sets the name
//! (default `message`); `id`, `retry` and unknown fields are ignored (a model response is never
//! resumed); a blank line dispatches the event unless its data is empty; an event not ended by a
//! blank line when the stream ends is discarded.

use std::collections::VecDeque;

/// One event: its name (`message` unless an `event` line said otherwise) and its data.
pub(crate) type SseEvent = (String, String);

/// An event grew past the cap, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge;

/// Parses the bytes of an event stream into events.
#[derive(Debug)]
pub(crate) struct SseParser {
    max_event: usize,
    /// The unfinished last line (its end not seen yet).
    line: Vec<u8>,
    /// Bytes of the current event so far: its finished lines with their ends.
    event_bytes: usize,
    name: String,
    data: String,
    /// Whether any `data` line came (`data:` alone gives data `""`, which is then dropped).
    has_data: bool,
    /// Whether the stream's first bytes are still to come (a BOM is skipped there).
    at_start: bool,
    /// The last line ended with CR: an LF first in the next chunk belongs to it.
    after_cr: bool,
    ready: VecDeque<SseEvent>,
    /// Bytes looked at, for the test of linearity.
    #[cfg(test)]
    scanned: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser that refuses an event of more than `max_event` bytes.
    pub(crate) fn new(max_event: usize) -> Self {
        SseParser {
            max_event,
            line: Vec::new(),
            event_bytes: 0,
            name: String::new(),
            data: String::new(),
            has_data: false,
            at_start: true,
            after_cr: false,
            ready: VecDeque::new(),
            #[cfg(test)]
            scanned: 0,
        }
    }

    /// Reads the next bytes of the stream; the events they complete wait in [`next`](Self::next).
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<(), TooLarge> {
        if self.at_start {
            // The BOM may itself arrive in pieces: hold back a prefix of it.
            let mut start = std::mem::take(&mut self.line);
            start.extend_from_slice(bytes);
            if start.len() < BOM.len() && BOM.starts_with(&start) {
                self.line = start;
                return Ok(());
            }
            self.at_start = false;
            let rest = start.strip_prefix(BOM).unwrap_or(&start).to_vec();
            return self.feed(&rest);
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                self.event_bytes += 1;
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            let end = bytes.iter().position(|&b| b == b'\n' || b == b'\r');
            #[cfg(test)]
            {
                self.scanned += end.map_or(bytes.len(), |e| e + 1);
            }
            let Some(end) = end else {
                self.line.extend_from_slice(bytes);
                return self.check();
            };
            let mut line_end = 1;
            if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => line_end = 2,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if end == 0 && self.line.is_empty() {
                // The blank line that ends an event is not part of it.
                self.dispatch();
            } else if self.line.is_empty() {
                self.event_bytes += end + line_end;
                self.check()?;
                self.line_done(&bytes[..end]);
            } else {
                self.line.extend_from_slice(&bytes[..end]);
                self.event_bytes += self.line.len() + line_end;
                let line = std::mem::take(&mut self.line);
                self.check()?;
                self.line_done(&line);
                // The buffer is kept for the next unfinished line.
                self.line = line;
                self.line.clear();
            }
            bytes = &bytes[end + line_end..];
        }
        Ok(())
    }

    /// The next complete event, if one is waiting.
    pub(crate) fn next(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    fn check(&self) -> Result<(), TooLarge> {
        if self.event_bytes.saturating_add(self.line.len()) > self.max_event {
            Err(TooLarge)
        } else {
            Ok(())
        }
    }

    /// One whole line (without its end).
    fn line_done(&mut self, line: &[u8]) {
        #[cfg(test)]
        {
            self.scanned += line.len();
        }
        if line.is_empty() {
            self.dispatch();
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&String::from_utf8_lossy(value));
            }
            b"event" => {
                self.name.clear();
                self.name.push_str(&String::from_utf8_lossy(value));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        self.event_bytes = 0;
        let name = std::mem::take(&mut self.name);
        let data = std::mem::take(&mut self.data);
        let has_data = std::mem::replace(&mut self.has_data, false);
        if !has_data {
            return;
        }
        let name = if name.is_empty() {
            "message".to_owned()
        } else {
            name
        };
        self.ready.push_back((name, data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `stream` fed in pieces of `size` bytes.
    fn parse_in(stream: &[u8], size: usize, max: usize) -> Result<Vec<SseEvent>, TooLarge> {
        let mut parser = SseParser::new(max);
        let mut events = Vec::new();
        for piece in stream.chunks(size.max(1)) {
            parser.feed(piece)?;
            events.extend(std::iter::from_fn(|| parser.next()));
        }
        Ok(events)
    }

    /// The events of `stream`, the same whatever the pieces it comes in.
    fn parse(stream: &str) -> Vec<SseEvent> {
        let whole = parse_in(stream.as_bytes(), stream.len(), usize::MAX).unwrap();
        for size in 1..=stream.len().min(9) {
            assert_eq!(
                parse_in(stream.as_bytes(), size, usize::MAX).unwrap(),
                whole,
                "in pieces of {size}"
            );
        }
        whole
    }

    fn event(name: &str, data: &str) -> SseEvent {
        (name.to_owned(), data.to_owned())
    }

    #[test]
    fn line_ends_are_lf_crlf_or_cr() {
        for end in ["\n", "\r\n", "\r"] {
            let stream = format!("data: a{end}data: b{end}{end}event: e{end}data: c{end}{end}");
            assert_eq!(
                parse(&stream),
                vec![event("message", "a\nb"), event("e", "c")],
                "{end:?}"
            );
        }
        // Mixed, and a CRLF split across pieces is one line end (checked by `parse`).
        assert_eq!(
            parse("data: a\r\ndata: b\rdata: c\n\r\n"),
            vec![event("message", "a\nb\nc")]
        );
    }

    #[test]
    fn fields_follow_the_standard() {
        assert_eq!(
            parse(
                ": a comment\ndata:no space\ndata:  two spaces\nid: 7\nretry: 10\nunknown: x\n\n"
            ),
            vec![event("message", "no space\n two spaces")]
        );
        // A line without a colon is a field with an empty value.
        assert_eq!(parse("data\ndata\n\n"), vec![event("message", "\n")]);
        assert_eq!(parse("data:\n\n"), vec![event("message", "")]);
        // No data: nothing is dispatched, and the name does not carry over.
        assert_eq!(
            parse("event: ping\n\ndata: x\n\n"),
            vec![event("message", "x")]
        );
        assert_eq!(
            parse("event: a\nevent: b\ndata: x\n\n"),
            vec![event("b", "x")]
        );
        assert_eq!(parse(":only comments\n:\n\n"), vec![]);
    }

    #[test]
    fn a_leading_bom_is_skipped_once() {
        // A BOM later on is part of a field name (an unknown field, ignored).
        assert_eq!(
            parse("\u{feff}data: x\n\n\u{feff}data: y\n\n"),
            vec![event("message", "x")]
        );
        assert_eq!(parse("\u{feff}data: x\n\n"), vec![event("message", "x")]);
    }

    #[test]
    fn a_last_event_without_its_blank_line_is_discarded() {
        assert_eq!(parse("data: a\n\ndata: b\n"), vec![event("message", "a")]);
        assert_eq!(parse("data: a\n\ndata: b"), vec![event("message", "a")]);
    }

    #[test]
    fn an_event_over_the_cap_is_refused_in_any_pieces() {
        let stream = format!("data: {}\n\n", "x".repeat(100));
        let size = stream.len() - 1; // the blank line ends it, without adding to it
        for pieces in [1, 7, stream.len()] {
            assert!(
                parse_in(stream.as_bytes(), pieces, size).is_ok(),
                "{pieces}"
            );
            assert_eq!(
                parse_in(stream.as_bytes(), pieces, size - 1),
                Err(TooLarge),
                "{pieces}"
            );
        }
        // A line that never ends is refused as it grows.
        let mut parser = SseParser::new(1000);
        let piece = [b'x'; 100];
        let refused = (0..20).find(|_| parser.feed(&piece).is_err());
        assert_eq!(refused, Some(10));
        // Comments count: they are part of the event's bytes.
        let comments = ": x\n".repeat(300);
        assert_eq!(parse_in(comments.as_bytes(), 64, 1000), Err(TooLarge));
        // Many events each under the cap are fine.
        let many = "data: 0123456789\n\n".repeat(10_000);
        assert_eq!(parse_in(many.as_bytes(), 4096, 20).unwrap().len(), 10_000);
    }

    #[test]
    fn scanning_is_linear_in_the_size_whatever_the_pieces() {
        // One 16 MiB event, delivered in pieces of 1 byte to 64 KiB: each byte is looked at a
        // bounded number of times (once for its line end, once to read its line).
        let size = 16 * 1024 * 1024;
        let mut stream = Vec::with_capacity(size + 16);
        stream.extend_from_slice(b"data: ");
        stream.resize(size, b'x');
        stream.extend_from_slice(b"\n\n");
        for pieces in [1, 3, 1024, 64 * 1024] {
            let mut parser = SseParser::new(usize::MAX);
            for piece in stream.chunks(pieces) {
                parser.feed(piece).unwrap();
            }
            let (_, data) = parser.next().expect("the event");
            assert_eq!(data.len(), size - 6);
            assert!(
                parser.scanned <= 3 * stream.len(),
                "pieces of {pieces}: {} bytes scanned for {}",
                parser.scanned,
                stream.len()
            );
        }
    }
}
