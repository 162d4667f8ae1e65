//! Criterion benchmarks of the sanitizer core (no Python).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

use _native::sanitize::sanitize;

const BOUND: usize = 4096;

/// A clean message: the gate proves it clean, nothing runs after it.
fn clean_120() -> String {
    "Request was cancelled by the client before stage 2 (code2wav) started; retry later with a smaller max_tokens value."
        .to_owned()
}

/// A clean message with a model id: the `/` sends it through the rules, which change nothing.
fn clean_model_id() -> String {
    "max_tokens must be <= 4096, got 10000; reduce max_tokens or the prompt length for Qwen/Qwen2.5-Omni-7B.".to_owned()
}

fn traceback_2k() -> String {
    let mut s = String::from("Traceback (most recent call last):\n");
    while s.len() < 2000 {
        s.push_str("  File \"/opt/conda/lib/python3.10/site-packages/vllm/v1/engine/core.py\", line 605, in run\n    raise e\n");
    }
    s.push_str("ValueError: max_tokens must be <= 4096, got 10000");
    s
}

fn repr_64k() -> String {
    let mut payload = String::new();
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u32 = 12345;
    while payload.len() < 64 * 1024 - 300 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        payload.push(alphabet[(x >> 16) as usize % 64] as char);
    }
    format!(
        "1 validation error:\n  {{'type': 'string_too_long', 'loc': ('body', 'messages', 0, 'content', 0, 'image_url', 'url'), \
         'msg': 'String should have at most 65536 characters', 'input': 'data:image/png;base64,{payload}'}}"
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sanitize");
    for (name, text) in [
        ("clean_120", clean_120()),
        ("clean_model_id", clean_model_id()),
        ("traceback_2k", traceback_2k()),
        ("repr_64k", repr_64k()),
    ] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| b.iter(|| sanitize(black_box(&text), BOUND).len()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
