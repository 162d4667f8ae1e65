//! Sanitizer properties on arbitrary UTF-8: no panic, output within the bound, idempotent,
//! borrowed (unchanged) whenever nothing was removed.
#![no_main]

use std::borrow::Cow;

use _native::sanitize::{normalize_parameter, sanitize};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The first byte picks a bound, small ones included, so truncation is exercised too.
    let bound = match data.first() {
        Some(b) if b % 4 == 0 => usize::from(*b),
        _ => 4096,
    };
    let once = sanitize(text, bound);
    assert!(once.len() <= bound, "output {} exceeds bound {bound}", once.len());
    if let Cow::Borrowed(b) = &once {
        assert_eq!(*b, text);
    }
    let twice = sanitize(&once, bound);
    assert_eq!(twice, once, "not idempotent");
    let _ = normalize_parameter(text);
});
