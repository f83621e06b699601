//! Account host patterns as MariaDB reads them: which patterns a client's address
//! matches, and which of several accounts of one name wins (the most specific).
//!
//! Sluice resolves no names: a pattern that is a host name matches nothing, except
//! `localhost`, which matches loopback addresses (what a server that resolves names
//! makes of a TCP client on 127.0.0.1) and clients of Sluice's Unix socket.

use crate::stream::Peer;
use std::net::{IpAddr, Ipv4Addr};

/// Whether an account whose host part is `pattern` admits `client`. A socket client has
/// no address: as in the server, only patterns that match the name `localhost` admit it.
pub fn admits(pattern: &str, client: &Peer) -> bool {
    match client {
        Peer::Tcp(address) => matches(pattern, address.ip()),
        Peer::Local => like(pattern.as_bytes(), b"localhost"),
    }
}

/// Whether an account whose host part is `pattern` admits a client at `ip`.
pub fn matches(pattern: &str, ip: IpAddr) -> bool {
    let ip = canonical(ip);
    if pattern.eq_ignore_ascii_case("localhost") {
        return ip.is_loopback();
    }
    if let Some((address, mask)) = pattern.split_once('/') {
        return netmask_matches(address, mask, ip);
    }
    like(pattern.as_bytes(), ip.to_string().as_bytes())
}

/// The server's ordering key (`get_sort()` in sql_acl.cc): a pattern without wildcards
/// outranks any with one; among those, the later the first wildcard, the more specific.
/// Larger sorts first.
pub fn specificity(pattern: &str) -> u8 {
    let mut escaped = false;
    for (i, c) in pattern.bytes().enumerate() {
        match c {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'%' | b'_' => return (i + 1).min(127) as u8,
            _ => {}
        }
    }
    if pattern.is_empty() {
        0
    } else {
        128
    }
}

/// IPv4 clients on a dual-stack socket appear as `::ffff:a.b.c.d`; accounts name them
/// in IPv4 form.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// `a.b.c.d/m.m.m.m`: IPv4 only, as in the server.
fn netmask_matches(address: &str, mask: &str, ip: IpAddr) -> bool {
    let (Ok(address), Ok(mask), IpAddr::V4(ip)) =
        (address.parse::<Ipv4Addr>(), mask.parse::<Ipv4Addr>(), ip)
    else {
        return false;
    };
    let (address, mask, ip) = (u32::from(address), u32::from(mask), u32::from(ip));
    ip & mask == address
}

/// SQL `LIKE` with `%`, `_` and `\` escapes, ASCII case-insensitive.
fn like(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'%', rest)) => (0..=text.len()).any(|i| like(rest, &text[i..])),
        Some((b'_', rest)) => !text.is_empty() && like(rest, &text[1..]),
        Some((b'\\', rest)) if !rest.is_empty() => {
            text.first()
                .is_some_and(|t| t.eq_ignore_ascii_case(&rest[0]))
                && like(&rest[1..], &text[1..])
        }
        Some((p, rest)) => {
            text.first().is_some_and(|t| t.eq_ignore_ascii_case(p)) && like(rest, &text[1..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn patterns_match_as_the_server_reads_them() {
        assert!(matches("%", ip("192.0.2.1")));
        assert!(matches("10.%", ip("10.1.2.3")));
        assert!(!matches("10.%", ip("110.1.2.3")));
        assert!(matches("10.0.0._", ip("10.0.0.7")));
        assert!(!matches("10.0.0._", ip("10.0.0.17")));
        assert!(matches("127.0.0.1", ip("127.0.0.1")));
        assert!(admits("localhost", &Peer::Local) && admits("%", &Peer::Local));
        assert!(admits("local%", &Peer::Local) && !admits("127.0.0.1", &Peer::Local));
        assert!(matches("127.0.0.1", ip("::ffff:127.0.0.1")));
        assert!(!matches("127.0.0.1", ip("127.0.0.2")));
        assert!(matches("localhost", ip("127.0.0.1")));
        assert!(matches("localhost", ip("::1")));
        assert!(!matches("localhost", ip("10.0.0.1")));
        assert!(matches("10.1.0.0/255.255.0.0", ip("10.1.200.3")));
        assert!(!matches("10.1.0.0/255.255.0.0", ip("10.2.0.3")));
        assert!(!matches("db.example.com", ip("10.0.0.1")));
        assert!(matches("::1", ip("::1")));
    }

    #[test]
    fn exact_hosts_outrank_wildcards_and_later_wildcards_outrank_earlier() {
        let mut hosts = vec!["%", "10.%", "10.0.0.%", "10.0.0.1", "localhost"];
        hosts.sort_by_key(|h| std::cmp::Reverse(specificity(h)));
        assert_eq!(hosts, ["10.0.0.1", "localhost", "10.0.0.%", "10.%", "%"]);
        assert_eq!(specificity(""), 0);
        assert_eq!(specificity("a\\%b"), 128);
    }
}
