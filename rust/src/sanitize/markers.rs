//! The markers that replace removed spans. Each is short, ASCII and never matched by a rule,
//! which is what makes the sanitizer idempotent.

/// A filesystem path (POSIX, Windows, UNC, home, relative, site-packages, model cache).
pub const PATH: &str = "<path>";
/// A removed block of Python traceback frames and their echoed source lines.
pub const TRACEBACK: &str = "<traceback>";
/// A memory address or pointer-sized hex value.
pub const ADDR: &str = "<addr>";
/// A credential: API key, token, password, signature, cookie, JWT.
pub const SECRET: &str = "<secret>";
/// A PEM private-key block.
pub const PRIVATE_KEY: &str = "<private-key>";
/// The payload of a `data:` URI.
pub const DATA: &str = "<data>";
/// A long base64 run (media or serialized data).
pub const BASE64: &str = "<base64>";
/// A binary `b'...'` bytes repr.
pub const BYTES: &str = "<bytes>";
/// The values of a multi-element tensor or array dump.
pub const TENSOR: &str = "<tensor>";
/// An e-mail address.
pub const EMAIL: &str = "<email>";
/// An internal (private, link-local, CGNAT, ULA, documentation) IP address.
pub const IP: &str = "<ip>";
/// An internal host name (cluster DNS, `.internal`, `.local`, EC2 `ip-…`).
pub const HOST: &str = "<host>";
