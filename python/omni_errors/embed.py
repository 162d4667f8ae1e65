"""Carrying records inside msgpack messages, as one frame in an ext type.

vLLM's msgpack encoder uses ext codes 1-3; omni-errors uses `EXT_CODE` (79, "O"). Use the hooks
with msgpack-python (`msgpack.packb(obj, default=default)`, `msgpack.unpackb(b, ext_hook=ext_hook)`)
or msgspec (`msgspec.msgpack.Encoder(enc_hook=enc_hook)`,
`msgspec.msgpack.Decoder(ext_hook=msgspec_ext_hook)`). Neither library is imported here until a
hook needs it.
"""

from __future__ import annotations

from typing import Any

from omni_errors._native import OmniErrorDetails, decode, encode

__all__ = ["EXT_CODE", "default", "enc_hook", "ext_hook", "msgspec_ext_hook"]

EXT_CODE = 79


def default(obj: object) -> Any:
    """msgpack-python `default`: a record becomes `ExtType(EXT_CODE, frame)`."""
    if isinstance(obj, OmniErrorDetails):
        import msgpack

        return msgpack.ExtType(EXT_CODE, encode(obj))
    why = f"cannot serialize {type(obj).__name__!r} object"
    raise TypeError(why)  # omni-errors: ignore[OE102]: msgpack's contract for `default`


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack-python `ext_hook`: `EXT_CODE` becomes a record; other codes stay `ExtType`."""
    if code == EXT_CODE:
        return decode(data)
    import msgpack

    return msgpack.ExtType(code, data)


def enc_hook(obj: object) -> Any:
    """msgspec `enc_hook`: a record becomes `msgspec.msgpack.Ext(EXT_CODE, frame)`."""
    if isinstance(obj, OmniErrorDetails):
        import msgspec

        return msgspec.msgpack.Ext(EXT_CODE, encode(obj))
    why = f"cannot serialize {type(obj).__name__!r} object"
    raise NotImplementedError(why)  # omni-errors: ignore[OE105]: msgspec's contract for `enc_hook`


def msgspec_ext_hook(code: int, data: memoryview) -> Any:
    """msgspec `ext_hook`: `EXT_CODE` becomes a record (decoded straight from the view)."""
    if code == EXT_CODE:
        return decode(data)
    import msgspec

    return msgspec.msgpack.Ext(code, bytes(data))
