//! Table-driven tests of the public codec API, and proptest round trips.
// A failed expectation in a test should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use _native::codec::{
    decode, decode_frame, encode_into, encoded_len, peek, DecodeErrorKind, Decoded, Frames, RULE_SET_UNKNOWN,
};
use _native::record::{Category, Details, MAX_ERROR_TYPE_LEN, MAX_MESSAGE_LEN, MAX_STAGE_ID};
use _native::sanitize::RULE_SET;
use proptest::prelude::*;

mod common;

fn frame(d: &Details) -> Vec<u8> {
    let mut out = vec![0; encoded_len(&d.as_ref())];
    encode_into(&d.as_ref(), RULE_SET, &mut out).expect("valid record");
    out
}

/// Re-seals a frame after a test edited it, so the checksum does not mask the edit.
fn reseal(mut f: Vec<u8>) -> Vec<u8> {
    let end = f.len() - 4;
    let crc = crc32c::crc32c(&f[..end]);
    f[end..].copy_from_slice(&crc.to_le_bytes());
    f
}

fn edit(at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut f = frame(&common::record());
    f[at..at + bytes.len()].copy_from_slice(bytes);
    reseal(f)
}

macro_rules! rejects {
    ($($name:ident: $input:expr => $field:literal at $offset:expr, $text:literal;)*) => {$(
        #[test]
        fn $name() {
            let input: Vec<u8> = $input;
            let err = decode(&input).expect_err("must be refused");
            assert_eq!((err.field(), err.offset), ($field, $offset), "{err}");
            assert_eq!(err.to_string(), $text);
        }
    )*};
}

rejects! {
    empty: vec![] => "header" at 0, "truncated frame: field `header` needs 16 bytes at byte 0, 0 available";
    bad_magic: edit(0, b"XX") => "magic" at 0, "field `magic` expected 0x4f45, got 0x5858 at byte 0";
    major_two: edit(2, &[2]) => "major_version" at 2,
        "field `major_version` 2 is not supported (this reader speaks 1) at byte 2";
    frame_len_huge: edit(4, &0x0100_0000u32.to_le_bytes()) => "frame_len" at 4,
        "field `frame_len` 16777216 is outside 24..=65536 at byte 4";
    reserved_flag: edit(10, &[0x80]) => "flags" at 10, "field `flags` has reserved bits set (0x80) at byte 10";
    reserved_byte: edit(11, &[1]) => "reserved" at 11, "field `reserved` has reserved bits set (0x1) at byte 11";
    client_500: edit(8, &500u16.to_le_bytes()) => "status_code" at 8,
        "field `status_code` 500 is outside 400..=499 required for category \"client\" at byte 8";
    fatal_client: edit(10, &[0x1A]) => "fatal" at 10,
        "field `fatal` may be true only for category \"server\" at byte 10";
    stage_over_max: edit(10, &[0x1C, 0, 0xFF, 0xFF]) => "stage_id" at 12,
        "field `stage_id` 65535 is outside 0..=65534 at byte 12";
    message_over_limit: edit(16, &4097u16.to_le_bytes()) => "message" at 16,
        "field `message` length 4097 exceeds limit 4096 (UTF-8 bytes) at byte 16";
    bad_utf8: edit(20, &[0xFF]) => "message" at 20, "field `message` is not valid UTF-8 at byte 20";
    trailing: { let mut f = frame(&common::record()); f.push(0); f } => "frame_len" at 100,
        "field `frame_len` 100 leaves trailing bytes: buffer has 101 (at byte 100); use decode_many for back-to-back frames";
}

#[test]
fn checksum_catches_any_single_flip() {
    let f = frame(&common::record());
    for i in 16..f.len() {
        let mut g = f.clone();
        g[i] ^= 0x01;
        let err = decode(&g).expect_err("flip must be caught");
        assert!(
            matches!(err.kind, DecodeErrorKind::ChecksumMismatch { .. }),
            "byte {i}: {err}"
        );
    }
}

#[test]
fn unknown_extensions_are_skipped() {
    let mut f = frame(&common::record());
    let crc_at = f.len() - 4;
    f.truncate(crc_at);
    f.extend_from_slice(&0x7A01u16.to_le_bytes());
    f.extend_from_slice(&3u16.to_le_bytes());
    f.extend_from_slice(b"new");
    f.extend_from_slice(&[0; 4]);
    let len = f.len() as u32;
    f[4..8].copy_from_slice(&len.to_le_bytes());
    let f = reseal(f);
    assert_eq!(
        decode(&f).expect("skips extension").details.to_owned(),
        common::record()
    );
}

#[test]
fn frames_iterates_and_stops_at_the_first_error() {
    let one = frame(&common::record());
    let mut buf = one.repeat(3);
    assert_eq!(Frames::new(&buf).flatten().count(), 3);
    buf.extend_from_slice(b"junk");
    let results: Vec<_> = Frames::new(&buf).collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[3].as_ref().expect_err("junk").offset, 3 * one.len());
}

#[test]
fn peek_matches_decode() {
    let f = frame(&common::record());
    let p = peek(&f).expect("valid");
    let Decoded {
        details: d,
        rule_set,
        frame_len,
    } = decode_frame(&f).expect("valid");
    assert_eq!(
        (p.category, p.fatal, p.status_code, p.stage_id, p.frame_len, p.rule_set),
        (d.category, d.fatal, d.status_code, d.stage_id, frame_len, rule_set)
    );
    assert_eq!(rule_set, RULE_SET);
}

#[test]
fn rule_set_is_read_from_the_header_whatever_its_value() {
    for rule_set in [RULE_SET_UNKNOWN, 1, RULE_SET, u16::MAX] {
        let f = edit(14, &rule_set.to_le_bytes());
        assert_eq!(decode(&f).expect("any rule set decodes").rule_set, rule_set);
        assert_eq!(peek(&f).expect("valid").rule_set, rule_set);
    }
}

fn details() -> impl Strategy<Value = Details> {
    (
        any::<bool>(),
        0u16..100,
        "\\PC{0,300}",
        "[A-Za-z_][A-Za-z0-9_]{0,63}",
        proptest::option::of("\\PC{0,40}"),
        proptest::option::of("[ -~]{0,80}"),
        proptest::option::of(0..=MAX_STAGE_ID),
        any::<bool>(),
    )
        .prop_map(
            |(server, off, message, error_type, parameter, request_id, stage_id, fatal)| Details {
                message,
                category: if server { Category::Server } else { Category::Client },
                status_code: if server { 500 } else { 400 } + off,
                error_type,
                parameter,
                request_id,
                stage_id,
                fatal: server && fatal,
            },
        )
}

proptest! {
    #[test]
    fn round_trip(d in details()) {
        prop_assume!(d.message.len() <= MAX_MESSAGE_LEN && d.error_type.len() <= MAX_ERROR_TYPE_LEN);
        let f = frame(&d);
        prop_assert_eq!(decode(&f).expect("round trip").details.to_owned(), d);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
        let _ = peek(&bytes);
        let _ = Frames::new(&bytes).count();
    }
}
