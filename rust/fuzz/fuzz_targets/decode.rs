//! Arbitrary bytes through the decoder, peek and the batch iterator: errors are fine, panics and
//! out-of-bounds reads are not; whatever decodes must re-encode to the same frame. Random bytes
//! almost never carry the right checksum, so each input is also decoded with its checksum made
//! right: that copy reaches the body (lengths, UTF-8, identifiers, extensions).
#![no_main]

use _native::codec::{decode, encode_into, encoded_len, peek, Frames};
use libfuzzer_sys::fuzz_target;

fn check(data: &[u8]) {
    let _ = Frames::new(data).count();
    if let Ok(decoded) = decode(data) {
        let details = decoded.details;
        let mut out = vec![0; encoded_len(&details)];
        let written = encode_into(&details, decoded.rule_set, &mut out).expect("a decoded record re-encodes");
        // Extensions are skipped, so a frame carrying them re-encodes shorter; the record must match.
        let again = decode(&out[..written]).expect("a re-encoded frame decodes");
        assert_eq!((again.details, again.rule_set), (details, decoded.rule_set));
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Ok(head) = peek(data) {
        let mut frame = data[..head.frame_len].to_vec();
        let body_end = frame.len() - 4;
        let crc = crc32c::crc32c(&frame[..body_end]);
        frame[body_end..].copy_from_slice(&crc.to_le_bytes());
        check(&frame);
    }
});
