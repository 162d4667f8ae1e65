//! Structured records through encode and decode: every valid record survives unchanged, every
//! invalid one is refused by the encoder without a panic.
#![no_main]

use _native::codec::{decode, encode_into, encoded_len};
use _native::record::{Category, DetailsRef};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    message: &'a str,
    server: bool,
    status_code: u16,
    error_type: &'a str,
    parameter: Option<&'a str>,
    request_id: Option<&'a str>,
    stage_id: Option<u32>,
    fatal: bool,
    rule_set: u16,
}

fuzz_target!(|input: Input<'_>| {
    let details = DetailsRef {
        message: input.message,
        category: if input.server { Category::Server } else { Category::Client },
        status_code: input.status_code,
        error_type: input.error_type,
        parameter: input.parameter,
        request_id: input.request_id,
        stage_id: input.stage_id,
        fatal: input.fatal,
    };
    let mut out = vec![0; encoded_len(&details)];
    match encode_into(&details, input.rule_set, &mut out) {
        Ok(written) => {
            let decoded = decode(&out[..written]).expect("valid records round-trip");
            assert_eq!((decoded.details, decoded.rule_set), (details, input.rule_set));
        }
        Err(_) => assert!(details.validate().is_err(), "encoder refused a valid record"),
    }
});
