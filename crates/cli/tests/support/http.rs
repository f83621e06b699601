//! A tiny blocking HTTP/1.1 client for testing the admin API: one request per connection
//! (`Connection: close`), responses delimited by `Content-Length`, chunks or the close.
//! Hand-written so that tests can send raw bytes no well-behaved client would.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest response read; admin answers are small, so more means something is wrong.
const MAX_RESPONSE: u64 = 64 << 20;

/// Why a request got no HTTP response.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing to talk to: name resolution or TCP connect failed.
    #[error("cannot connect to {address}: {message}")]
    Connect { address: String, message: String },
    /// Connected, but the exchange failed (reset, timeout...).
    #[error("talking to {address}: {source}")]
    Io { address: String, source: io::Error },
    /// Something answered, but not with HTTP we understand.
    #[error("bad HTTP response from {address}: {message}")]
    Protocol { address: String, message: String },
}

/// One HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    /// Names lowercased, in order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// Where and how to send requests.
#[derive(Debug, Clone)]
pub struct Client {
    /// "host:port".
    pub address: String,
    /// Sent as `Authorization: Bearer ...` when set.
    pub token: Option<sluice::config::Secret>,
    pub connect_timeout: Duration,
    /// Longest wait for the server between two reads (or writes).
    pub io_timeout: Duration,
}

impl Client {
    pub fn new(address: impl Into<String>, token: Option<sluice::config::Secret>) -> Client {
        Client {
            address: address.into(),
            token,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
        }
    }

    pub fn get(&self, path: &str) -> Result<Response, Error> {
        self.request("GET", path, None)
    }

    /// Sends `body` as `application/json`.
    pub fn send_json(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Response, Error> {
        self.request(method, path, Some(body.to_string().as_bytes()))
    }

    /// Sends one request and reads the whole response.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Response, Error> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nUser-Agent: sluice-admin\r\n",
            self.address
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {}\r\n", token.0));
        }
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body.unwrap_or_default());
        self.exchange(&request)
    }

    /// Sends raw bytes and reads the response: for requests `request` would not build.
    pub fn exchange(&self, request: &[u8]) -> Result<Response, Error> {
        let mut stream = self.connect()?;
        let io_error = |source| Error::Io {
            address: self.address.clone(),
            source,
        };
        // A server may answer (413, 401) and close before reading all of a large body;
        // its answer is still worth reading, so a failed write is only fatal if none came.
        let written = stream.write_all(request).and_then(|()| stream.flush());
        let mut raw = Vec::new();
        let read = Read::by_ref(&mut stream)
            .take(MAX_RESPONSE)
            .read_to_end(&mut raw);
        if let Err(e) = read {
            if raw.is_empty() {
                return Err(io_error(written.err().unwrap_or(e)));
            }
        }
        if raw.is_empty() {
            if let Err(e) = written {
                return Err(io_error(e));
            }
        }
        parse_response(&raw).map_err(|message| Error::Protocol {
            address: self.address.clone(),
            message,
        })
    }

    fn connect(&self) -> Result<TcpStream, Error> {
        let connect_error = |message: String| Error::Connect {
            address: self.address.clone(),
            message,
        };
        let addresses = self
            .address
            .to_socket_addrs()
            .map_err(|e| connect_error(e.to_string()))?;
        let mut last = None;
        for address in addresses {
            match TcpStream::connect_timeout(&address, self.connect_timeout) {
                Ok(stream) => {
                    let io = |source| Error::Io {
                        address: self.address.clone(),
                        source,
                    };
                    stream.set_read_timeout(Some(self.io_timeout)).map_err(io)?;
                    stream
                        .set_write_timeout(Some(self.io_timeout))
                        .map_err(io)?;
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(connect_error(last.map_or_else(
            || "the name resolves to no address".to_owned(),
            |e| e.to_string(),
        )))
    }
}

/// Parses a complete response as read until the server closed the connection.
pub fn parse_response(mut raw: &[u8]) -> Result<Response, String> {
    loop {
        let end = find(raw, b"\r\n\r\n").ok_or("the response ended inside its header")?;
        let head = std::str::from_utf8(&raw[..end]).map_err(|_| "the header is not UTF-8")?;
        let rest = &raw[end + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
            return Err(format!("bad status line {status_line:?}"));
        };
        if !version.starts_with("HTTP/1.") {
            return Err(format!("bad status line {status_line:?}"));
        }
        let status: u16 = code
            .parse()
            .ok()
            .filter(|c| (100..600).contains(c))
            .ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| format!("bad header line {line:?}"))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        if (100..200).contains(&status) {
            // Interim answer (100 Continue...): the real one follows.
            raw = rest;
            continue;
        }
        let mut response = Response {
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        response.body = if chunked {
            dechunk(rest)?
        } else if let Some(length) = response.header("content-length") {
            let length: usize = length
                .parse()
                .map_err(|_| format!("bad Content-Length {length:?}"))?;
            rest.get(..length)
                .ok_or_else(|| format!("the body ended after {} of {length} bytes", rest.len()))?
                .to_vec()
        } else {
            rest.to_vec()
        };
        return Ok(response);
    }
}

fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let end = find(raw, b"\r\n").ok_or("the chunked body ended inside a chunk size")?;
        let line = std::str::from_utf8(&raw[..end]).map_err(|_| "bad chunk size")?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
        raw = &raw[end + 2..];
        if size == 0 {
            // Trailers, if any, carry nothing the admin client needs.
            return Ok(body);
        }
        let data = raw
            .get(..size)
            .ok_or("the chunked body ended inside a chunk")?;
        body.extend_from_slice(data);
        raw = raw
            .get(size..)
            .and_then(|r| r.strip_prefix(b"\r\n"))
            .ok_or("a chunk is not followed by CRLF")?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_body() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        )
        .unwrap();
        assert_eq!((r.status, r.reason.as_str()), (200, "OK"));
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.body, b"{}");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}").is_err());
    }

    #[test]
    fn chunked_body() {
        let r = parse_response(
            b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nx-trailer: y\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.body, b"{\"a\":1}");
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab")
                .is_err()
        );
    }

    #[test]
    fn close_delimited_and_interim() {
        let r = parse_response(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 500 Internal Server Error\r\n\r\noops",
        )
        .unwrap();
        assert_eq!(r.status, 500);
        assert_eq!(r.body, b"oops");
    }

    #[test]
    fn garbage_is_refused() {
        for raw in [
            &b""[..],
            b"SSH-2.0-OpenSSH\r\n",
            b"HTTP/1.1 abc\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        ] {
            assert!(parse_response(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn connection_refused_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let e = Client::new(address.clone(), None).get("/").unwrap_err();
        assert!(matches!(e, Error::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&address));
    }
}
