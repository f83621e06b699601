//! The blocking HTTP client `sluice admin` talks to the admin API with: one request, the
//! whole answer read, and failures sorted by whether anything answered.

use std::time::Duration;

use sluice::config::Secret;

/// Largest response read; admin answers are small, so more means something is wrong.
const MAX_RESPONSE: u64 = 64 << 20;

/// Why a request got no HTTP response.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing to talk to: name resolution or TCP connect failed.
    #[error("cannot connect to {address}: {message}")]
    Connect { address: String, message: String },
    /// Connected, but the exchange failed (reset, timeout...).
    #[error("talking to {address}: {message}")]
    Io { address: String, message: String },
    /// Something answered, but not with HTTP we understand, or the request could not be
    /// made at all.
    #[error("bad HTTP exchange with {address}: {message}")]
    Protocol { address: String, message: String },
}

/// One HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub body: Vec<u8>,
}

impl Response {
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
    pub token: Option<Secret>,
    pub connect_timeout: Duration,
    /// Longest wait for each step of the exchange (sending, the answer's head, its body).
    pub io_timeout: Duration,
}

impl Client {
    pub fn new(address: impl Into<String>, token: Option<Secret>) -> Client {
        Client {
            address: address.into(),
            token,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
        }
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
        let io = Some(self.io_timeout);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(self.connect_timeout))
            .timeout_send_request(io)
            .timeout_send_body(io)
            .timeout_recv_response(io)
            .timeout_recv_body(io)
            // Error answers carry the server's explanation, which we print.
            .http_status_as_error(false)
            .user_agent("sluice-admin")
            .accept("application/json")
            .build()
            .into();
        let mut request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.address));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {}", token.0));
        }
        let sent = match body {
            Some(body) => request
                .header("Content-Type", "application/json")
                .body(body)
                .map(|r| agent.run(r)),
            None => request.body(ureq::SendBody::none()).map(|r| agent.run(r)),
        };
        let mut response = sent
            .map_err(|e| self.protocol(e.to_string()))?
            .map_err(|e| self.classify(e))?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_vec()
            .map_err(|e| self.classify(e))?;
        Ok(Response {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or_default().to_owned(),
            body,
        })
    }

    fn protocol(&self, message: String) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            message,
        }
    }

    /// Sorts ureq's errors the way the exit status needs: nothing reached, cut off, or
    /// answered with something that is not HTTP.
    fn classify(&self, e: ureq::Error) -> Error {
        let address = self.address.clone();
        let message = e.to_string();
        match e {
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => {
                Error::Connect { address, message }
            }
            ureq::Error::Io(io) if is_connect_failure(&io) => Error::Connect { address, message },
            ureq::Error::Io(_) | ureq::Error::Timeout(_) => Error::Io { address, message },
            _ => Error::Protocol { address, message },
        }
    }
}

fn is_connect_failure(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | AddrNotAvailable | HostUnreachable | NetworkUnreachable
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_refused_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let e = Client::new(address.clone(), None)
            .request("GET", "/", None)
            .unwrap_err();
        assert!(matches!(e, Error::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&address));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"SSH-2.0-OpenSSH\r\n\r\n");
        });
        let e = Client::new(address, None)
            .request("GET", "/", None)
            .unwrap_err();
        server.join().unwrap();
        assert!(matches!(e, Error::Protocol { .. }), "{e}");
    }
}
