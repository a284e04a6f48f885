//! Property tests: every encoder round-trips arbitrary instances, and every decoder
//! returns (never panics) on arbitrary octets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

fn text() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|s| s.chars().take(24).collect())
}

fn octets(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn reference() -> impl Strategy<Value = ValueReference> {
    (text(), any::<u32>()).prop_map(|(handle, index)| ValueReference {
        handle,
        index: ValueIndex(index),
    })
}

fn ttl() -> impl Strategy<Value = Ttl> {
    prop_oneof![
        any::<u32>().prop_map(Ttl::Relative),
        any::<u32>().prop_map(Ttl::Absolute),
    ]
}

fn handle_value() -> impl Strategy<Value = HandleValue> {
    let head = (any::<u32>(), text(), octets(64), ttl());
    let tail = (any::<u32>(), any::<u8>(), vec(reference(), 0..4));
    (head, tail).prop_map(
        |((index, value_type, data, ttl), (timestamp, perms, references))| HandleValue {
            index: ValueIndex(index),
            value_type,
            data,
            ttl,
            timestamp,
            permissions: Permissions::from_bits(perms),
            references,
        },
    )
}

fn admin_record() -> impl Strategy<Value = AdminRecord> {
    (any::<u16>(), text(), any::<u32>(), any::<bool>()).prop_map(
        |(perms, admin_handle, admin_index, legacy_padding)| AdminRecord {
            permissions: AdminPermissions(perms),
            admin_handle,
            admin_index,
            legacy_padding,
        },
    )
}

/// Addresses as the wire keeps them: IPv6 in `::/96` always comes back as IPv4.
fn address() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|o| IpAddr::V4(Ipv4Addr::from(o))),
        any::<[u8; 16]>()
            .prop_filter("::/96 is IPv4", |o| o[..12].iter().any(|&b| b != 0))
            .prop_map(|o| IpAddr::V6(Ipv6Addr::from(o))),
    ]
}

fn interface() -> impl Strategy<Value = Interface> {
    (any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(kind, protocol, port)| Interface {
        kind: InterfaceKind::from_wire(kind),
        protocol: InterfaceProtocol::from_wire(protocol),
        port,
    })
}

fn server() -> impl Strategy<Value = ServerRecord> {
    (any::<u32>(), address(), octets(32), vec(interface(), 0..4)).prop_map(
        |(server_id, address, public_key, interfaces)| ServerRecord {
            server_id,
            address,
            public_key,
            interfaces,
        },
    )
}

fn hash_option() -> impl Strategy<Value = HashOption> {
    prop_oneof![
        Just(HashOption::ByPrefix),
        Just(HashOption::BySuffix),
        Just(HashOption::ByHandle),
    ]
}

fn site_info() -> impl Strategy<Value = SiteInfo> {
    let head = (any::<u16>(), any::<(u8, u8)>(), any::<u16>(), any::<u8>());
    let tail = (
        hash_option(),
        text(),
        vec((text(), text()), 0..3),
        vec(server(), 0..3),
    );
    (head, tail).prop_map(
        |((version, (major, minor), serial, flags), (hash, filter, attributes, servers))| {
            SiteInfo {
                data_format_version: version,
                protocol_major: major,
                protocol_minor: minor,
                serial_number: serial,
                flags: SiteFlags(flags),
                hash_option: hash,
                hash_filter: filter,
                attributes,
                servers,
            }
        },
    )
}

/// Magnitudes without leading zero octets, the form decoding produces.
fn magnitude() -> impl Strategy<Value = Vec<u8>> {
    octets(40).prop_map(|mut v| {
        let first = v.iter().position(|&b| b != 0).unwrap_or(v.len());
        v.drain(..first);
        v
    })
}

fn public_key() -> impl Strategy<Value = PublicKey> {
    let known = [
        PublicKey::RSA_KEY_TYPE,
        PublicKey::DSA_KEY_TYPE,
        PublicKey::DH_KEY_TYPE,
    ];
    prop_oneof![
        (magnitude(), magnitude())
            .prop_map(|(exponent, modulus)| PublicKey::Rsa { exponent, modulus }),
        (magnitude(), magnitude(), magnitude(), magnitude())
            .prop_map(|(q, p, g, y)| PublicKey::Dsa { q, p, g, y }),
        (magnitude(), magnitude(), magnitude()).prop_map(|(y, p, g)| PublicKey::Dh { y, p, g }),
        (text(), octets(32))
            .prop_filter("known key types decode as such", move |(t, _)| {
                !known.contains(&t.as_str())
            })
            .prop_map(|(key_type, bytes)| PublicKey::Other { key_type, bytes }),
    ]
}

proptest! {
    #[test]
    fn handle_value_round_trips(value in handle_value()) {
        let bytes = value.to_bytes();
        prop_assert_eq!(bytes.len(), value.encoded_len());
        prop_assert_eq!(HandleValue::from_bytes(&bytes)?, value);
    }

    #[test]
    fn value_list_round_trips(values in vec(handle_value(), 0..4)) {
        let mut w = Writer::new();
        encode_value_list(&values, &mut w);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        prop_assert_eq!(decode_value_list(&mut r)?, values);
        prop_assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn admin_record_round_trips(record in admin_record()) {
        prop_assert_eq!(AdminRecord::decode(&record.encode())?, record);
    }

    #[test]
    fn site_info_round_trips(site in site_info()) {
        prop_assert_eq!(SiteInfo::decode(&site.encode())?, site);
    }

    #[test]
    fn public_key_round_trips(key in public_key()) {
        prop_assert_eq!(PublicKey::decode(&key.encode())?, key);
    }

    #[test]
    fn value_list_data_round_trips(members in vec(reference(), 0..6)) {
        let list = ValueList(members);
        prop_assert_eq!(ValueList::decode(&list.encode())?, list);
    }

    #[test]
    fn admin_bit_string_round_trips(bits in 0u16..0x1000) {
        let perms = AdminPermissions(bits);
        prop_assert_eq!(perms.to_bit_string().parse::<AdminPermissions>(), Ok(perms));
    }

    #[test]
    fn decoders_never_panic(bytes in octets(256)) {
        let _ = HandleValue::from_bytes(&bytes);
        let _ = decode_value_list(&mut Reader::new(&bytes));
        let _ = AdminRecord::decode(&bytes);
        let _ = ValueList::decode(&bytes);
        let _ = SiteInfo::decode(&bytes);
        let _ = PublicKey::decode(&bytes);
        let _ = HandleTarget::decode(&bytes);
        for known in KnownType::ALL {
            let _ = known.validate(&bytes);
        }
    }

    /// Random octets rarely get past the first length field; mutating a valid
    /// encoding reaches the deeper branches.
    #[test]
    fn decoders_never_panic_on_mutated_input(
        site in site_info(),
        key in public_key(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        for mut bytes in [site.encode(), key.encode()] {
            for (at, value) in &flips {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] = *value;
                }
            }
            let _ = SiteInfo::decode(&bytes);
            let _ = PublicKey::decode(&bytes);
        }
    }
}
