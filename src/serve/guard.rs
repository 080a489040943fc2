//! The checks every request passes on its headers alone, before its body is read: the `Host`
//! is this server's address, a browser `Origin` is loopback, the API key matches (compared in
//! constant time), and a POST declares a JSON body.
//!
//! Design decision: the key is never compared byte by byte. At start the server draws a random
//! 32-byte MAC key and keeps only HMAC-SHA256(key) of the API key; a presented key is MACed the
//! same way and checked with `Mac::verify_slice`, which compares in constant time. The time a
//! wrong key takes therefore says nothing about the right key, not even its length.

use std::net::{IpAddr, SocketAddr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// An API key held as a MAC under a per-process random key.
pub struct KeyCheck {
    mac_key: [u8; 32],
    tag: Vec<u8>,
}

impl std::fmt::Debug for KeyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyCheck(..)")
    }
}

impl KeyCheck {
    /// Hold `key`.
    pub fn new(key: &str) -> Self {
        let mac_key: [u8; 32] = rand::random();
        let tag = Self::mac(&mac_key, key.as_bytes())
            .finalize()
            .into_bytes()
            .to_vec();
        Self { mac_key, tag }
    }

    fn mac(mac_key: &[u8; 32], data: &[u8]) -> HmacSha256 {
        // HMAC takes a key of any length, so this cannot fail.
        let mut m = match HmacSha256::new_from_slice(mac_key) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC accepts any key length"),
        };
        m.update(data);
        m
    }

    /// Whether `presented` is the key (constant time in the key's content and length).
    pub fn matches(&self, presented: &[u8]) -> bool {
        Self::mac(&self.mac_key, presented)
            .verify_slice(&self.tag)
            .is_ok()
    }

    /// Whether an `Authorization` header value carries the key as `Bearer <key>`.
    pub fn authorizes(&self, authorization: Option<&[u8]>) -> bool {
        let Some(v) = authorization else {
            return false;
        };
        let Some(rest) = v
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
            .map(|_| &v[7..])
        else {
            return false;
        };
        self.matches(rest.trim_ascii())
    }
}

/// Split `host[:port]` (`[v6]:port` for IPv6) into the name and the port.
fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        return match after {
            "" => Some((name, None)),
            p => Some((name, Some(p.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match s.rsplit_once(':') {
        Some((name, p)) if !name.contains(':') => Some((name, Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s, None)),
    }
}

/// Whether a `Host` header names this server bound at `local`: the bound address itself,
/// `localhost` when bound to loopback (or to every address), any IP literal when bound to every
/// address, or a name in `extra`; always with the bound port. A DNS name that merely resolves
/// here (DNS rebinding) is refused.
pub fn host_allowed(host: &str, local: SocketAddr, extra: &[String]) -> bool {
    let Some((name, port)) = split_host_port(host.trim()) else {
        return false;
    };
    if port.unwrap_or(80) != local.port() || name.is_empty() {
        return false;
    }
    let ip = local.ip();
    if let Ok(given) = name.parse::<IpAddr>() {
        return given == ip || ip.is_unspecified();
    }
    if name.eq_ignore_ascii_case("localhost") {
        return ip.is_loopback() || ip.is_unspecified();
    }
    extra.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Whether a browser `Origin` may call the API: `http(s)://` with a loopback host
/// (`localhost`, `127.0.0.0/8`, `[::1]`) on any port, or one of `extra` exactly. `null` and
/// every other site are refused.
pub fn origin_allowed(origin: &str, extra: &[String]) -> bool {
    let origin = origin.trim();
    if extra
        .iter()
        .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    if rest.contains(['/', '@', '?', '#']) {
        return false;
    }
    let Some((name, _)) = split_host_port(rest) else {
        return false;
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a `Content-Type` value is JSON (`application/json`, parameters allowed).
pub fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_matches_only_itself_under_every_spelling_of_the_header() {
        let k = KeyCheck::new("sekrit-123");
        assert!(k.matches(b"sekrit-123"));
        for bad in [
            &b""[..],
            b"sekrit-12",
            b"sekrit-1234",
            b"SEKRIT-123",
            b"sekrit-124",
            b"x",
        ] {
            assert!(!k.matches(bad), "{bad:?}");
        }
        assert!(k.authorizes(Some(b"Bearer sekrit-123")));
        assert!(k.authorizes(Some(b"bearer  sekrit-123 ")));
        assert!(!k.authorizes(None));
        assert!(!k.authorizes(Some(b"Basic sekrit-123")));
        assert!(!k.authorizes(Some(b"sekrit-123")));
        assert!(!k.authorizes(Some(b"Bearer")));
        // Two checks of one key draw different MAC keys; nothing is derivable across processes.
        assert_ne!(KeyCheck::new("a").tag, KeyCheck::new("a").tag);
    }

    #[test]
    fn host_must_be_the_bound_address_with_its_port() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().expect("addr");
        assert!(host_allowed("127.0.0.1:8080", lo, &[]));
        assert!(host_allowed("localhost:8080", lo, &[]));
        assert!(host_allowed("LOCALHOST:8080", lo, &[]));
        for bad in [
            "127.0.0.1:8081",
            "127.0.0.1",
            "attacker.example:8080",
            "localhost.attacker.example:8080",
            "10.0.0.1:8080",
            "",
            ":8080",
            "127.0.0.1:80:8080",
            "[::1]:8080",
        ] {
            assert!(!host_allowed(bad, lo, &[]), "{bad:?}");
        }
        assert!(host_allowed("box.lan:8080", lo, &["box.lan".into()]));
        let v6: SocketAddr = "[::1]:9000".parse().expect("addr");
        assert!(host_allowed("[::1]:9000", v6, &[]));
        assert!(host_allowed("localhost:9000", v6, &[]));
        let any: SocketAddr = "0.0.0.0:9000".parse().expect("addr");
        assert!(host_allowed("192.168.1.7:9000", any, &[]));
        assert!(!host_allowed("rebind.example:9000", any, &[]));
        let public: SocketAddr = "192.168.1.7:80".parse().expect("addr");
        assert!(host_allowed("192.168.1.7", public, &[]));
        assert!(!host_allowed("localhost", public, &[]));
    }

    #[test]
    fn only_loopback_origins_pass() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://127.5.0.1:443",
            "http://[::1]:8080",
        ] {
            assert!(origin_allowed(ok, &[]), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "file://",
            "http://user@127.0.0.1",
            "ftp://127.0.0.1",
            "http://10.0.0.1:8080",
        ] {
            assert!(!origin_allowed(bad, &[]), "{bad}");
        }
        assert!(origin_allowed(
            "https://app.example",
            &["https://app.example/".into()]
        ));
    }

    #[test]
    fn content_type_must_be_json() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
