//! Criterion benches of the pure-Rust codec: encode, decode (with validation), peek, and a
//! 10 000-frame batch, against the floor of a plain CRC32C over the same bytes.

use std::hint::black_box;

#[path = "../tests/common/mod.rs"]
mod common;

use _native::codec::{decode, encode_into, encoded_len, peek, Frames};
use _native::sanitize::RULE_SET;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let d = common::record();
    let r = d.as_ref();
    let mut frame = vec![0; encoded_len(&r)];
    let _ = encode_into(&r, RULE_SET, &mut frame);
    let mut g = c.benchmark_group("codec");
    g.bench_function("encode_into", |b| {
        let mut out = vec![0; frame.len()];
        b.iter(|| encode_into(black_box(&r), RULE_SET, &mut out));
    });
    g.bench_function("decode", |b| {
        b.iter(|| decode(black_box(&frame)).map(|d| d.details.status_code));
    });
    g.bench_function("peek", |b| b.iter(|| peek(black_box(&frame)).map(|p| p.status_code)));
    g.bench_function("crc32c floor", |b| b.iter(|| crc32c::crc32c(black_box(&frame))));
    g.finish();

    let batch = frame.repeat(10_000);
    let mut g = c.benchmark_group("batch");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("decode 10k frames", |b| {
        b.iter(|| Frames::new(black_box(&batch)).flatten().count());
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
