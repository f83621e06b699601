//! Authentication plugins: `mysql_native_password`, `caching_sha2_password` and
//! MariaDB's `client_ed25519` scrambles, verification on the server side, and the
//! auth-switch messages.

use bytes::{BufMut, BytesMut};
use rand::Rng;
use sha1::Sha1;
use sha2::{Digest, Sha256};

pub const NATIVE_PASSWORD: &str = "mysql_native_password";
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
pub const CLEAR_PASSWORD: &str = "mysql_clear_password";
/// MariaDB's `ed25519` plugin, as named in the protocol (the server side is `ed25519`).
pub const CLIENT_ED25519: &str = "client_ed25519";
/// The nonce `client_ed25519` signs, and the signature's length.
pub const ED25519_NONCE_LEN: usize = 32;
pub const ED25519_SIGNATURE_LEN: usize = 64;

/// First byte of an "auth more data" packet (`caching_sha2_password` steps).
pub const AUTH_MORE_DATA: u8 = 0x01;
/// First byte of an auth switch request.
pub const AUTH_SWITCH: u8 = 0xfe;
/// `caching_sha2_password`: the client asks for the server's RSA public key.
pub const SHA2_REQUEST_PUBLIC_KEY: u8 = 0x02;
/// `caching_sha2_password`: fast authentication succeeded, an OK follows.
pub const SHA2_FAST_AUTH_OK: u8 = 0x03;
/// `caching_sha2_password`: the server needs the password itself (TLS or RSA).
pub const SHA2_PERFORM_FULL_AUTH: u8 = 0x04;

pub const SCRAMBLE_LEN: usize = 20;

/// A fresh 20-byte nonce, free of NUL (the handshake NUL-terminates it) and `$`, as MySQL does.
pub fn new_scramble() -> [u8; SCRAMBLE_LEN] {
    let mut rng = rand::thread_rng();
    let mut s = [0u8; SCRAMBLE_LEN];
    for b in &mut s {
        *b = loop {
            let c = rng.gen_range(1u8..=0x7f);
            if c != b'$' {
                break c;
            }
        };
    }
    s
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn xor<const N: usize>(a: &[u8; N], b: &[u8; N]) -> [u8; N] {
    let mut out = [0u8; N];
    for i in 0..N {
        out[i] = a[i] ^ b[i];
    }
    out
}

/// What `mysql.user` stores for `mysql_native_password`: SHA1(SHA1(password)).
pub fn native_stored_hash(password: &[u8]) -> [u8; 20] {
    sha1(&[&sha1(&[password])])
}

/// Client side of `mysql_native_password`: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
pub fn native_scramble(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    xor(&stage1, &sha1(&[nonce, &stage2])).to_vec()
}

/// Client side of `mysql_native_password` from SHA1(password) alone, which is what a
/// proxy learns from a client's verified scramble (see [`native_verify`]).
pub fn native_scramble_from_stage1(stage1: &[u8; 20], nonce: &[u8]) -> Vec<u8> {
    let stage2 = sha1(&[stage1]);
    xor(stage1, &sha1(&[nonce, &stage2])).to_vec()
}

/// Server side of `mysql_native_password`. On success returns SHA1(password), which is
/// what a backend login needs, so a verified client's credentials can be reused.
pub fn native_verify(stored: &[u8; 20], nonce: &[u8], response: &[u8]) -> Option<[u8; 20]> {
    let response: &[u8; 20] = response.try_into().ok()?;
    let candidate = xor(response, &sha1(&[nonce, stored]));
    (sha1(&[&candidate]) == *stored).then_some(candidate)
}

/// What the `caching_sha2_password` fast path compares against: SHA256(SHA256(password)).
pub fn sha2_cached_hash(password: &[u8]) -> [u8; 32] {
    sha256(&[&sha256(&[password])])
}

/// Client side of `caching_sha2_password`:
/// SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce).
pub fn sha2_scramble(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    xor(&stage1, &sha256(&[&stage2, nonce])).to_vec()
}

/// Server side of the `caching_sha2_password` fast path against a cached hash.
pub fn sha2_verify(cached: &[u8; 32], nonce: &[u8], response: &[u8]) -> bool {
    let Ok(response) = <&[u8; 32]>::try_from(response) else {
        return false;
    };
    let candidate = xor(response, &sha256(&[cached, nonce]));
    sha256(&[&candidate]) == *cached
}

/// MariaDB's ed25519 key expansion: the password stands where RFC 8032 has a 32-byte
/// seed, so SHA512(password) gives the clamped scalar and the nonce prefix.
fn ed25519_expanded(password: &[u8]) -> ed25519_dalek::hazmat::ExpandedSecretKey {
    let mut h = sha2::Sha512::new();
    h.update(password);
    let hash: [u8; 64] = h.finalize().into();
    ed25519_dalek::hazmat::ExpandedSecretKey::from_bytes(&hash)
}

/// What `mysql.global_priv` stores for an `ed25519` account (base64-encoded there): the
/// public key of the password.
pub fn ed25519_public_key(password: &[u8]) -> [u8; 32] {
    ed25519_dalek::VerifyingKey::from(&ed25519_expanded(password)).to_bytes()
}

/// Client side of `client_ed25519`: the signature of the server's nonce.
pub fn ed25519_sign(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    let key = ed25519_expanded(password);
    let public = ed25519_dalek::VerifyingKey::from(&key);
    ed25519_dalek::hazmat::raw_sign::<sha2::Sha512>(&key, nonce, &public)
        .to_bytes()
        .to_vec()
}

/// Server side of `client_ed25519`: whether `signature` signs `nonce` for `public_key`.
pub fn ed25519_verify(public_key: &[u8; 32], nonce: &[u8], signature: &[u8]) -> bool {
    use ed25519_dalek::Verifier;
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(public_key) else {
        return false;
    };
    let Ok(signature) = ed25519_dalek::Signature::from_slice(signature) else {
        return false;
    };
    key.verify(nonce, &signature).is_ok()
}

/// A fresh `client_ed25519` nonce. Sent in an auth switch, which carries any bytes.
pub fn new_ed25519_nonce() -> [u8; ED25519_NONCE_LEN] {
    let mut n = [0u8; ED25519_NONCE_LEN];
    rand::thread_rng().fill(&mut n);
    n
}

/// The bytes RSA-encrypted in a `caching_sha2_password` full authentication without
/// TLS: the NUL-terminated password XOR the nonce repeated.
pub fn xor_password_with_nonce(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    let mut p = password.to_vec();
    p.push(0);
    if nonce.is_empty() {
        return p;
    }
    for (i, b) in p.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    p
}

/// An auth switch request payload: 0xfe, plugin name, NUL, plugin data: the nonce and
/// a NUL, except for `client_ed25519`, whose client reads exactly 32 bytes.
pub fn auth_switch_payload(plugin: &str, nonce: &[u8]) -> BytesMut {
    let mut b = BytesMut::with_capacity(2 + plugin.len() + nonce.len() + 1);
    b.put_u8(AUTH_SWITCH);
    b.put_slice(plugin.as_bytes());
    b.put_u8(0);
    b.put_slice(nonce);
    if plugin != CLIENT_ED25519 {
        b.put_u8(0);
    }
    b
}

/// Parses an auth switch request into (plugin name, nonce).
pub fn parse_auth_switch(payload: &[u8]) -> Option<(String, Vec<u8>)> {
    let rest = payload.strip_prefix(&[AUTH_SWITCH])?;
    let end = rest.iter().position(|&b| b == 0)?;
    let plugin = String::from_utf8_lossy(&rest[..end]).into_owned();
    let data = &rest[end + 1..];
    // The ed25519 nonce is 32 random bytes with no terminator: its last byte may be 0.
    let data = if plugin == CLIENT_ED25519 {
        data
    } else {
        data.strip_suffix(&[0]).unwrap_or(data)
    };
    Some((plugin, data.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_known_hash() {
        // SELECT PASSWORD('secret') on MySQL/MariaDB.
        let h = native_stored_hash(b"secret");
        let hex: String = h.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(hex, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
    }

    #[test]
    fn native_verify_accepts_right_and_rejects_wrong() {
        let nonce = new_scramble();
        let stored = native_stored_hash(b"pw");
        let ok = native_scramble(b"pw", &nonce);
        assert_eq!(native_verify(&stored, &nonce, &ok), Some(sha1(&[b"pw"])));
        let bad = native_scramble(b"pw2", &nonce);
        assert_eq!(native_verify(&stored, &nonce, &bad), None);
        assert_eq!(native_verify(&stored, &nonce, b"short"), None);
        let stage1 = native_verify(&stored, &nonce, &ok).unwrap();
        assert_eq!(native_scramble_from_stage1(&stage1, &nonce), ok);
    }

    #[test]
    fn sha2_verify_accepts_right_and_rejects_wrong() {
        let nonce = new_scramble();
        let cached = sha2_cached_hash(b"pw");
        assert!(sha2_verify(&cached, &nonce, &sha2_scramble(b"pw", &nonce)));
        assert!(!sha2_verify(&cached, &nonce, &sha2_scramble(b"px", &nonce)));
        assert!(!sha2_verify(&cached, &nonce, &[]));
    }

    #[test]
    fn scramble_has_no_nul_or_dollar() {
        for _ in 0..100 {
            assert!(new_scramble().iter().all(|&b| b != 0 && b != b'$'));
        }
    }

    #[test]
    fn auth_switch_round_trip() {
        let p = auth_switch_payload(CACHING_SHA2_PASSWORD, b"abcdefghijklmnopqrst");
        let (plugin, nonce) = parse_auth_switch(&p).unwrap();
        assert_eq!(plugin, CACHING_SHA2_PASSWORD);
        assert_eq!(nonce, b"abcdefghijklmnopqrst");
    }

    #[test]
    fn ed25519_matches_mariadb() {
        // `SELECT ED25519_PASSWORD('secret')` on MariaDB 10.11, base64 without padding.
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode("ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY")
            .unwrap();
        assert_eq!(ed25519_public_key(b"secret").to_vec(), key);
    }

    #[test]
    fn ed25519_verify_accepts_right_and_rejects_wrong() {
        let nonce = new_ed25519_nonce();
        let key = ed25519_public_key(b"pw");
        let sig = ed25519_sign(b"pw", &nonce);
        assert_eq!(sig.len(), ED25519_SIGNATURE_LEN);
        assert!(ed25519_verify(&key, &nonce, &sig));
        assert!(!ed25519_verify(&key, &nonce, &ed25519_sign(b"px", &nonce)));
        assert!(!ed25519_verify(&key, &new_ed25519_nonce(), &sig));
        assert!(!ed25519_verify(&key, &nonce, &sig[..63]));
    }

    #[test]
    fn ed25519_switch_keeps_a_nonce_ending_in_nul() {
        let mut nonce = [7u8; ED25519_NONCE_LEN];
        nonce[31] = 0;
        let p = auth_switch_payload(CLIENT_ED25519, &nonce);
        assert_eq!(p.len(), 1 + CLIENT_ED25519.len() + 1 + 32);
        assert_eq!(parse_auth_switch(&p).unwrap().1, nonce);
    }

    #[test]
    fn xor_round_trips() {
        let x = xor_password_with_nonce(b"secret", b"nonce");
        let back = xor_password_with_nonce(&x[..x.len() - 1], b"nonce");
        assert_eq!(&back[..6], b"secret");
    }
}
