//! The error record: its fields, its invariants and its size limits.
//!
//! Pure Rust (no pyo3): the Python class, the codec and the fuzzers all validate through here.

use std::fmt;

/// Longest `message`, in UTF-8 bytes. Also the sanitizer's default output bound.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// Longest `error_type`, in UTF-8 bytes.
pub const MAX_ERROR_TYPE_LEN: usize = 64;
/// Longest `parameter`, in UTF-8 bytes.
pub const MAX_PARAMETER_LEN: usize = 128;
/// Longest `request_id`, in UTF-8 bytes.
pub const MAX_REQUEST_ID_LEN: usize = 256;
/// Largest `stage_id`; pipelines have a handful of stages, and the frame stores it in 16 bits.
pub const MAX_STAGE_ID: u32 = 65_534;

/// Who owns the failure. Consumers decide ownership from this, never from the status range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// The request was wrong: a 4xx.
    Client,
    /// The server failed: a 5xx.
    Server,
}

impl Category {
    /// The literal used in Python and JSON.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::Client => "client",
            Category::Server => "server",
        }
    }

    /// Parses the Python/JSON literal.
    ///
    /// # Errors
    /// [`RecordError::UnknownCategory`] for anything but `"client"` and `"server"`.
    pub fn parse(s: &str) -> Result<Self, RecordError> {
        match s {
            "client" => Ok(Category::Client),
            "server" => Ok(Category::Server),
            _ => Err(RecordError::UnknownCategory { value: excerpt(s) }),
        }
    }

    /// The status codes this category may carry.
    #[must_use]
    pub const fn status_range(self) -> (u16, u16) {
        match self {
            Category::Client => (400, 499),
            Category::Server => (500, 599),
        }
    }
}

/// A record whose strings borrow from elsewhere: a frame being decoded, or Python `str`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DetailsRef<'a> {
    pub message: &'a str,
    pub category: Category,
    pub status_code: u16,
    pub error_type: &'a str,
    pub parameter: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub stage_id: Option<u32>,
    pub fatal: bool,
}

/// An owned record, for Rust callers and tests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Details {
    pub message: String,
    pub category: Category,
    pub status_code: u16,
    pub error_type: String,
    pub parameter: Option<String>,
    pub request_id: Option<String>,
    pub stage_id: Option<u32>,
    pub fatal: bool,
}

impl Details {
    /// Borrows this record's strings.
    #[must_use]
    pub fn as_ref(&self) -> DetailsRef<'_> {
        DetailsRef {
            message: &self.message,
            category: self.category,
            status_code: self.status_code,
            error_type: &self.error_type,
            parameter: self.parameter.as_deref(),
            request_id: self.request_id.as_deref(),
            stage_id: self.stage_id,
            fatal: self.fatal,
        }
    }
}

impl DetailsRef<'_> {
    /// Copies the strings out.
    #[must_use]
    pub fn to_owned(&self) -> Details {
        Details {
            message: self.message.to_owned(),
            category: self.category,
            status_code: self.status_code,
            error_type: self.error_type.to_owned(),
            parameter: self.parameter.map(str::to_owned),
            request_id: self.request_id.map(str::to_owned),
            stage_id: self.stage_id,
            fatal: self.fatal,
        }
    }

    /// Checks every invariant; the first violation is returned.
    ///
    /// # Errors
    /// A [`RecordError`] naming the field, the rule and the offending value.
    pub fn validate(&self) -> Result<(), RecordError> {
        check_len("message", self.message, MAX_MESSAGE_LEN)?;
        check_len("error_type", self.error_type, MAX_ERROR_TYPE_LEN)?;
        check_identifier(self.error_type)?;
        if let Some(parameter) = self.parameter {
            check_len("parameter", parameter, MAX_PARAMETER_LEN)?;
        }
        if let Some(request_id) = self.request_id {
            check_len("request_id", request_id, MAX_REQUEST_ID_LEN)?;
        }
        check_status(self.category, self.status_code)?;
        if let Some(stage_id) = self.stage_id {
            check_stage_id(stage_id)?;
        }
        if self.fatal && self.category == Category::Client {
            return Err(RecordError::FatalClient);
        }
        Ok(())
    }
}

/// Checks that `status` lies in `category`'s range.
///
/// # Errors
/// [`RecordError::StatusOutOfRange`] otherwise.
pub fn check_status(category: Category, status: u16) -> Result<(), RecordError> {
    let (min, max) = category.status_range();
    if (min..=max).contains(&status) {
        Ok(())
    } else {
        Err(RecordError::StatusOutOfRange {
            category,
            status: i64::from(status),
        })
    }
}

/// Checks that `error_type` is an identifier.
///
/// # Errors
/// [`RecordError::NotIdentifier`] otherwise.
pub fn check_identifier(error_type: &str) -> Result<(), RecordError> {
    if is_identifier(error_type) {
        Ok(())
    } else {
        Err(RecordError::NotIdentifier {
            value: excerpt(error_type),
        })
    }
}

/// Checks the `stage_id` bound.
///
/// # Errors
/// [`RecordError::StageIdOutOfRange`] above [`MAX_STAGE_ID`].
pub fn check_stage_id(stage_id: u32) -> Result<(), RecordError> {
    if stage_id <= MAX_STAGE_ID {
        Ok(())
    } else {
        Err(RecordError::StageIdOutOfRange {
            value: i64::from(stage_id),
        })
    }
}

fn check_len(field: &'static str, value: &str, max: usize) -> Result<(), RecordError> {
    if value.len() <= max {
        Ok(())
    } else {
        Err(RecordError::TooLong {
            field,
            len: value.len(),
            max,
        })
    }
}

/// An ASCII identifier: a letter or `_`, then letters, digits or `_` (`BadRequestError`).
#[must_use]
pub fn is_identifier(s: &str) -> bool {
    // A table lookup per byte, ANDed (no branch per byte): this runs on every decode.
    const START: u8 = 2;
    const CONTINUE: u8 = 1;
    const fn table() -> [u8; 256] {
        let mut t = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            if c.is_ascii_alphabetic() || c == b'_' {
                t[b] = START | CONTINUE;
            } else if c.is_ascii_digit() {
                t[b] = CONTINUE;
            }
            b += 1;
        }
        t
    }
    static CLASS: [u8; 256] = table();
    match s.as_bytes().split_first() {
        Some((&first, rest)) => {
            let all = rest.iter().fold(CLASS[usize::from(first)], |acc, &b| {
                acc & (CLASS[usize::from(b)] | START)
            });
            all == START | CONTINUE
        }
        None => false,
    }
}

/// At most 40 characters of a rejected value, so an error about it stays small.
fn excerpt(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

/// A violated record invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// A string longer than its bound, in UTF-8 bytes.
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    /// `error_type` is not an identifier.
    NotIdentifier { value: String },
    /// `status_code` outside the category's range.
    StatusOutOfRange { category: Category, status: i64 },
    /// `stage_id` above the bound.
    StageIdOutOfRange { value: i64 },
    /// `fatal=True` on a client error.
    FatalClient,
    /// `category` is neither `"client"` nor `"server"`.
    UnknownCategory { value: String },
}

impl RecordError {
    /// The field the error is about.
    #[must_use]
    pub fn field(&self) -> &'static str {
        match self {
            RecordError::TooLong { field, .. } => field,
            RecordError::NotIdentifier { .. } => "error_type",
            RecordError::StatusOutOfRange { .. } => "status_code",
            RecordError::StageIdOutOfRange { .. } => "stage_id",
            RecordError::FatalClient => "fatal",
            RecordError::UnknownCategory { .. } => "category",
        }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::TooLong { field, len, max } => {
                write!(f, "field `{field}` length {len} exceeds limit {max} (UTF-8 bytes)")
            }
            RecordError::NotIdentifier { value } => {
                write!(
                    f,
                    "field `error_type` must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got {value:?}"
                )
            }
            RecordError::StatusOutOfRange { category, status } => {
                let (min, max) = category.status_range();
                write!(
                    f,
                    "field `status_code` {status} is outside {min}..={max} required for category {:?}",
                    category.as_str()
                )
            }
            RecordError::StageIdOutOfRange { value } => {
                write!(f, "field `stage_id` {value} is outside 0..={MAX_STAGE_ID}")
            }
            RecordError::FatalClient => write!(f, "field `fatal` may be true only for category \"server\""),
            RecordError::UnknownCategory { value } => {
                write!(
                    f,
                    "field `category` must be one of \"client\", \"server\", got {value:?}"
                )
            }
        }
    }
}

impl std::error::Error for RecordError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Details {
        Details {
            message: "max_tokens must be <= 4096, got 10000".into(),
            category: Category::Client,
            status_code: 400,
            error_type: "BadRequestError".into(),
            parameter: Some("max_tokens".into()),
            request_id: Some("req-1".into()),
            stage_id: Some(0),
            fatal: false,
        }
    }

    #[test]
    fn valid_record_passes() {
        assert_eq!(sample().as_ref().validate(), Ok(()));
    }

    #[test]
    fn status_must_match_category() {
        let mut d = sample();
        d.status_code = 500;
        let err = d.as_ref().validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `status_code` 500 is outside 400..=499 required for category \"client\""
        );
    }

    #[test]
    fn fatal_client_rejected() {
        let mut d = sample();
        d.fatal = true;
        assert_eq!(d.as_ref().validate(), Err(RecordError::FatalClient));
    }

    #[test]
    fn identifier_rules() {
        assert!(is_identifier("BadRequestError"));
        assert!(is_identifier("_x1"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("1abc"));
        assert!(!is_identifier("Bad Request"));
        assert!(!is_identifier("Ünicode"));
    }

    #[test]
    fn lengths_are_bounded() {
        let mut d = sample();
        d.request_id = Some("r".repeat(MAX_REQUEST_ID_LEN + 1));
        assert_eq!(
            d.as_ref().validate().unwrap_err().to_string(),
            "field `request_id` length 257 exceeds limit 256 (UTF-8 bytes)"
        );
    }

    #[test]
    fn excerpt_is_bounded_on_char_boundaries() {
        let s = "é".repeat(100);
        assert_eq!(excerpt(&s).chars().count(), 43);
    }
}
