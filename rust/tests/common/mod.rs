//! The one sample record the integration tests and the benches share: a client error with every
//! optional field but the stage set. The tests' byte offsets are this record's frame's.

use _native::record::{Category, Details};

pub fn record() -> Details {
    Details {
        message: "max_tokens must be <= 4096, got 10000".into(),
        category: Category::Client,
        status_code: 400,
        error_type: "BadRequestError".into(),
        parameter: Some("max_tokens".into()),
        request_id: Some("chatcmpl-1".into()),
        stage_id: None,
        fatal: false,
    }
}
