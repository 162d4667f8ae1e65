//! Table-driven cases for the public sanitizer API: one line per rule class, plus the guarantees
//! (idempotence, bound, adversarial shapes finishing, parameter names).

use _native::sanitize::{normalize_parameter, rule_names, sanitize, TRUNCATION_MARKER};

const BOUND: usize = 4096;

macro_rules! cases {
    ($($name:ident: $input:expr => $expected:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let out = sanitize($input, BOUND);
                assert_eq!(out, $expected, "input: {:?}", $input);
                assert_eq!(sanitize(&out, BOUND), out, "not idempotent");
            }
        )*
    };
}

cases! {
    clean_limit: "max_tokens must be <= 4096, got 10000" => "max_tokens must be <= 4096, got 10000";
    clean_model_id: "Model 'Qwen/Qwen2.5-Omni-7B' has no stage 3" => "Model 'Qwen/Qwen2.5-Omni-7B' has no stage 3";
    clean_route: "POST /v1/audio/speech is not enabled" => "POST /v1/audio/speech is not enabled";
    clean_route_with_root_word: "GET /v1/models/Qwen returned 404" => "GET /v1/models/Qwen returned 404";
    clean_url: "404 for url: https://huggingface.co/Qwen/Qwen2.5-Omni-7B/tree/main" => "404 for url: https://huggingface.co/Qwen/Qwen2.5-Omni-7B/tree/main";
    clean_version: "requires vllm>=0.11.0; found 12.4.5.8" => "requires vllm>=0.11.0; found 12.4.5.8";
    clean_sha: "revision a09a35458c702b33eeacc393d103063234e8bc28 not cached" => "revision a09a35458c702b33eeacc393d103063234e8bc28 not cached";
    clean_bind: "Failed to bind 0.0.0.0:8000: address already in use" => "Failed to bind 0.0.0.0:8000: address already in use";
    posix_path: "No such file: '/home/alice/models/config.json'" => "No such file: '<path>'";
    posix_path_spaces: "open '/home/a b/My Models/c.json' failed" => "open '<path>' failed";
    posix_file_ext: "in /foo/bar/baz.py:12" => "in <path>:12";
    windows_path: r"loading C:\Users\Bob\x\y.dll failed" => "loading <path> failed";
    windows_slash_quoted: "cannot open 'C:/Users/José/test image.png'" => "cannot open '<path>'";
    home_path: "not found under ~/models/wan2.1 (expected x)" => "not found under <path> (expected x)";
    relative_path: "in ./models/qwen/config.json." => "in <path>.";
    hidden_dir: "read .cache/huggingface/token: denied" => "read <path>: denied";
    bare_relative: "at lora/adapters/c-1/adapter_config.json has r=8" => "at <path> has r=8";
    traceback: "Traceback (most recent call last):\n  File \"/x/y.py\", line 1, in f\n    g()\nValueError: bad" => "<traceback>\nValueError: bad";
    address: "<_io.BytesIO object at 0x7f8070a36957>" => "<_io.BytesIO object at <addr>>";
    openai: "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 revoked" => "key <secret> revoked";
    anthropic: "x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345" => "x-api-key: <secret>";
    hugging_face: "(token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH) bad" => "(token <secret>) bad";
    github: "ghp_abcdefghijklmnopqrstuvwxyz0123456789 expired" => "<secret> expired";
    slack: "xoxb-886385441171-7229867707090-cleYT3LENRfCJq" => "<secret>";
    stripe: "sk_live_51KmKztbO1ReZmS11DFvEvFz is live" => "<secret> is live";
    aws_id: "<AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId>" => "<AWSAccessKeyId><secret></AWSAccessKeyId>";
    aws_secret_kv: "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" => "aws_secret_access_key = <secret>";
    gcp_key: "key AIzaSyA1234567890abcdefghijklmnopqrstu" => "key <secret>";
    jwt: "bad eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U x" => "bad <secret> x";
    bearer: "Authorization: Bearer TWq51o2t19pVwXlxeNnmEMb8" => "Authorization: Bearer <secret>";
    basic: "Authorization: Basic YWRtaW46cGFzc3dvcmQ=" => "Authorization: Basic <secret>";
    userinfo: "redis://user:p4ss-w0rd@kv.example.com:6379/0 down" => "redis://user:<secret>@kv.example.com:6379/0 down";
    query_secret: "https://a.example.com/x?api_key=abc123def456&id=7" => "https://a.example.com/x?api_key=<secret>&id=7";
    amz_query: "https://b.s3.amazonaws.com/k.mp4?X-Amz-Signature=f8a19f104ad61e28&X-Amz-Expires=3600" => "https://b.s3.amazonaws.com/k.mp4?X-Amz-Signature=<secret>&X-Amz-Expires=3600";
    kv_json: r#"{"password": "hunter2!x", "user": "omni"}"# => r#"{"password": "<secret>", "user": "omni"}"#;
    kv_intl: "数据库连接失败:密码=Dummy-APtyIv.KKelG61 无效" => "数据库连接失败:密码=<secret> 无效";
    kv_placeholder_kept: "api_key=None is not allowed" => "api_key=None is not allowed";
    cli_flag: "--api-key Dummy-BtYPx8~oe5D194 was passed" => "--api-key <secret> was passed";
    pem: "key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\nssl error" => "key: <private-key>\nssl error";
    data_uri: "bad data:image/png;base64,iVBORw0KGgoAAAANSUhEUg== (x)" => "bad data:image/png;base64,<data> (x)";
    bytes_repr: r"magic bytes b'\x89PNG\r\n\x1a\n' wrong" => "magic bytes <bytes> wrong";
    tensor: "got tensor([[1.0, 2.0],\n        [3.0, 4.0]], device='cuda:0')" => "got tensor(<tensor>, device='cuda:0')";
    tensor_scalar: "loss is tensor(nan) at step 0" => "loss is tensor(nan) at step 0";
    email: "contact jane.doe@corp.example.com now" => "contact <email> now";
    private_ip: "connect to 10.42.249.66:6379 failed" => "connect to <ip>:6379 failed";
    ula_ip: "connect to [fd12:3456:789a:1::5]:29500 failed" => "connect to [<ip>]:29500 failed";
    cluster_host: "rank 3 on ip-10-254-21-7.ec2.internal:29500" => "rank 3 on <host>:29500";
    k8s_host: "redis-master.default.svc.cluster.local refused" => "<host> refused";
    program_files: r"open C:\Program Files (x86)\Steam\a.exe now" => "open <path> now";
    user_with_space: r"in C:\Users\John Smith\AppData\x.log ok" => "in <path> ok";
    env_percent: r"cache %LOCALAPPDATA%\hf\hub missing" => "cache <path> missing";
    env_powershell: r"at $env:USERPROFILE\.cache\x failed" => "at <path> failed";
    env_posix: "under ${HF_HOME}/hub/models--x failed" => "under <path> failed";
    dollar_amount_kept: "costs $5/month, not $10" => "costs $5/month, not $10";
    numbered_root_in_url: "https://h//data1/x/y.bin 404" => "https://h/<path> 404";
    decimal_pointer: "data_ptr() returned 140234567890944" => "data_ptr() returned <addr>";
    decimal_named_pointer: "ptr=4831838208 bad" => "ptr=<addr> bad";
    decimal_count_kept: "requested 100000000000000 tokens" => "requested 100000000000000 tokens";
    spaced_key: "login with password hunter2 failed" => "login with password <secret> failed";
    spaced_key_phrase: "Invalid API key 9f86d081884c7d659a2feaa0c55ad015 for org" => "Invalid API key <secret> for org";
    spaced_key_prose_kept: "password must be at least 8 characters" => "password must be at least 8 characters";
    spaced_key_user_password: "proxy credentials jdoe:Winter2024 rejected" => "proxy credentials <secret> rejected";
    spaced_key_host_port_kept: "token 0.0.0.0:8000 and session localhost:8080" => "token 0.0.0.0:8000 and session localhost:8080";
    glued_key: "access_token_9b2f1c7d3e4a5b6c7d8e9f0a1b2c3d4e is invalid" => "access_token_<secret> is invalid";
    glued_request_id_kept: "cmpl-2a2b7b9f0b7c6f0bbf2903b56e77b8c7 done" => "cmpl-2a2b7b9f0b7c6f0bbf2903b56e77b8c7 done";
    ntlm_userinfo: r"HTTP_PROXY=http://corp\jdoe:Winter24!@proxy.example.com:8080 x" => r"HTTP_PROXY=http://corp\jdoe:<secret>@proxy.example.com:8080 x";
    telegram_bot_in_url: "https://api.telegram.org/bot123:ABCdefGHIjkl/sendMessage 401" => "https://api.telegram.org/bot<secret> 401";
    class_names_kept: "archs: ['Qwen2_5OmniForConditionalGeneration', 'MiniCPMO2_6ForConditionalGeneration']" => "archs: ['Qwen2_5OmniForConditionalGeneration', 'MiniCPMO2_6ForConditionalGeneration']";
    log_prefixed_traceback: "(P pid=1) ERROR [c.py:1]   File \"/x/c.py\", line 2, in f\n(P pid=1) ERROR [c.py:1]     g(x)\n(P pid=1) ERROR [c.py:1] ValueError: v" => "<traceback>\n(P pid=1) ERROR [c.py:1] ValueError: v";
    ipython_traceback: "File ~/x/r.py:722, in R.load(self)\n    721 a = 1\n--> 722 b = g()\nValueError: v" => "<traceback>\nValueError: v";
}

/// docs/sanitizer.md lists every rule of the table, in priority order.
#[test]
fn the_docs_list_the_rule_table() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sanitizer.md")).expect("docs");
    let list = docs
        .split("The rules, in priority order")
        .nth(1)
        .expect("the rule list");
    let listed: Vec<&str> = list
        .split(". (")
        .next()
        .unwrap_or_default()
        .split('`')
        .skip(3)
        .step_by(2)
        .collect();
    assert_eq!(listed, rule_names());
}

#[test]
fn truncation_keeps_head_and_tail() {
    let text = format!("ValueError: head {} final line", "word ".repeat(5000));
    let out = sanitize(&text, BOUND);
    assert!(out.len() <= BOUND);
    assert!(out.starts_with("ValueError: head"));
    assert!(out.ends_with("final line"));
    assert!(out.contains(TRUNCATION_MARKER));
    assert_eq!(sanitize(&out, BOUND), out);
}

#[test]
fn adversarial_shapes_finish() {
    let mib = 1 << 20;
    let shapes = [
        "/a".repeat(mib / 2),
        "<obj at 0x".repeat(mib / 10),
        "a.".repeat(mib / 2),
        format!("data:image/png;base64,{}", ",".repeat(mib)),
        "-----BEGIN PRIVATE KEY-----".repeat(mib / 27),
        "b'\\x".repeat(mib / 4),
        "tensor([".repeat(mib / 8),
        "password=".repeat(mib / 9),
        "https://".repeat(mib / 8),
        "File \"x\", line 1\n".repeat(mib / 18),
        "'/home/".repeat(mib / 7),
        "A1b2".repeat(mib / 4),
        "1.2.3.".repeat(mib / 6),
        "a@b.".repeat(mib / 4),
        "/a/0x7f8070a36957".repeat(mib / 17),
    ];
    for s in &shapes {
        let out = sanitize(s, BOUND);
        assert!(out.len() <= BOUND);
        assert_eq!(sanitize(&out, BOUND), out);
    }
}

#[test]
fn parameter_names() {
    assert_eq!(normalize_parameter("body.max_tokens"), "max_tokens");
    assert_eq!(
        normalize_parameter("('body', 'messages', 0, 'content')"),
        "messages[0].content"
    );
    assert_eq!(normalize_parameter("max_tokens"), "max_tokens");
}

/// Inputs the fuzzer once broke (first byte picks the bound, as in the fuzz target).
#[test]
fn fuzz_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    for entry in std::fs::read_dir(dir).expect("regression dir") {
        let data = std::fs::read(entry.expect("entry").path()).expect("read");
        let Ok(text) = std::str::from_utf8(&data) else { continue };
        let bound = match data.first() {
            Some(b) if b % 4 == 0 => usize::from(*b),
            _ => BOUND,
        };
        let once = sanitize(text, bound);
        assert!(once.len() <= bound);
        assert_eq!(sanitize(&once, bound), once);
    }
}

#[test]
fn embedded_url_userinfo() {
    let out = sanitize(
        "redirect https://a.example.com/login?next=https://bob:hunter2x@b.example.com/x done",
        BOUND,
    );
    assert!(!out.contains("hunter2x"), "{out}");
    assert!(out.contains("https://a.example.com/login?next="));
}
