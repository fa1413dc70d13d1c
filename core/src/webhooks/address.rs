//! Which network addresses a destination may be reached at.
//!
//! A relay that posts to URLs its users configure must not become a way
//! into the network it runs in (server-side request forgery): by default
//! it refuses destinations that resolve to loopback, private, link-local
//! or otherwise non-public addresses, as Svix, Convoy and RudderStack's
//! webhook destinations do. The host resolves names (that is I/O) and asks
//! here about every address it would connect to, at connect time, so a
//! name that later resolves elsewhere is caught too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `addr` is a public unicast address: one a destination may be
/// reached at when private networks are not allowed.
///
/// Refused (IANA special-purpose registries): IPv4 `0.0.0.0/8`,
/// `10.0.0.0/8`, `100.64.0.0/10` (shared/CGNAT), `127.0.0.0/8`,
/// `169.254.0.0/16`, `172.16.0.0/12`, `192.0.0.0/24`, the documentation
/// nets (`192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`),
/// `192.168.0.0/16`, `198.18.0.0/15` (benchmarking), multicast and
/// `240.0.0.0/4` with broadcast; IPv6 `::`, `::1`, `fc00::/7` (unique
/// local), `fe80::/10` and `fec0::/10`, multicast, `2001:db8::/32`
/// (documentation), and any IPv4 address carried in IPv6 (mapped,
/// compatible, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) by the IPv4 rule.
pub fn is_public_address(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    let [b0, b1, b2, _] = a.octets();
    let refused = b0 == 0
        || b0 == 10
        || (b0 == 100 && (64..128).contains(&b1))
        || b0 == 127
        || (b0 == 169 && b1 == 254)
        || (b0 == 172 && (16..32).contains(&b1))
        || (b0 == 192 && b1 == 0 && (b2 == 0 || b2 == 2))
        || (b0 == 192 && b1 == 168)
        || (b0 == 198 && (b1 == 18 || b1 == 19))
        || (b0 == 198 && b1 == 51 && b2 == 100)
        || (b0 == 203 && b1 == 0 && b2 == 113)
        || b0 >= 224;
    !refused
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    // IPv4 inside IPv6: the IPv4 rule decides.
    let embedded = match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some((hi, lo)),
        // IPv4-compatible (deprecated), but not :: and ::1.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => Some((hi, lo)),
        [0x2002, hi, lo, ..] => Some((hi, lo)),
        _ => None,
    };
    if let Some((hi, lo)) = embedded {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    let refused = a.is_unspecified()
        || a.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] & 0xff00) == 0xff00
        || (s[0] == 0x2001 && s[1] == 0x0db8);
    !refused
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public_address(s.parse().unwrap())
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        for a in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
        ] {
            assert!(!public(a), "{a} is not public");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
        ] {
            assert!(public(a), "{a} is public");
        }
    }
}
