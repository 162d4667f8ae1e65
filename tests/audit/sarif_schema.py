"""The part of the SARIF 2.1.0 JSON schema (OASIS, `sarif-schema-2.1.0.json`) that covers every object
the audit writes: each object's required properties, its allowed property names (the official schema
sets `additionalProperties: false` on all of them), and the enums and minimums of the values we use.
Written out here so that the test needs no network."""

from __future__ import annotations

from typing import Any

LEVEL = {"enum": ["none", "note", "warning", "error"]}
_MESSAGE_STRING = {
    "type": "object",
    "additionalProperties": False,
    "required": ["text"],
    "properties": {"text": {"type": "string"}, "markdown": {"type": "string"}, "properties": {"type": "object"}},
}


def _object(required: list[str], properties: dict[str, Any], any_of: list[list[str]] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }
    if any_of:
        schema["anyOf"] = [{"required": r} for r in any_of]
    return schema


_ARTIFACT_LOCATION = _object(
    [],
    {
        "uri": {"type": "string", "format": "uri-reference"},
        "uriBaseId": {"type": "string"},
        "index": {"type": "integer", "minimum": -1},
        "description": {"type": "object"},
        "properties": {"type": "object"},
    },
)
_REGION = _object(
    [],
    {name: {"type": "integer", "minimum": 1} for name in ("startLine", "startColumn", "endLine", "endColumn")}
    | {name: {"type": "integer", "minimum": -1} for name in ("charOffset", "charLength", "byteOffset", "byteLength")}
    | {"snippet": {"type": "object"}, "message": {"type": "object"}, "sourceLanguage": {"type": "string"}},
)
_MESSAGE = _object(
    [],
    {
        "text": {"type": "string"},
        "markdown": {"type": "string"},
        "id": {"type": "string"},
        "arguments": {"type": "array", "items": {"type": "string"}},
        "properties": {"type": "object"},
    },
    any_of=[["text"], ["id"]],
)
_RESULT = _object(
    ["message"],
    {
        "ruleId": {"type": "string"},
        "ruleIndex": {"type": "integer", "minimum": -1},
        "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
        "level": LEVEL,
        "message": _MESSAGE,
        "locations": {
            "type": "array",
            "items": _object(
                [],
                {
                    "id": {"type": "integer", "minimum": -1},
                    "physicalLocation": _object(
                        [],
                        {
                            "address": {"type": "object"},
                            "artifactLocation": _ARTIFACT_LOCATION,
                            "region": _REGION,
                            "contextRegion": _REGION,
                            "properties": {"type": "object"},
                        },
                        any_of=[["address"], ["artifactLocation"]],
                    ),
                    "logicalLocations": {"type": "array"},
                    "message": _MESSAGE,
                    "annotations": {"type": "array"},
                    "relationships": {"type": "array"},
                    "properties": {"type": "object"},
                },
            ),
        },
        "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
        "fingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
        "baselineState": {"enum": ["new", "unchanged", "updated", "absent"]},
        "suppressions": {
            "type": "array",
            "items": _object(
                ["kind"],
                {
                    "guid": {"type": "string"},
                    "kind": {"enum": ["inSource", "external"]},
                    "status": {"enum": ["accepted", "underReview", "rejected"]},
                    "justification": {"type": "string"},
                    "location": {"type": "object"},
                    "properties": {"type": "object"},
                },
            ),
        },
        "properties": {"type": "object"},
    },
)
_RULE = _object(
    ["id"],
    {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "shortDescription": _MESSAGE_STRING,
        "fullDescription": _MESSAGE_STRING,
        "help": _MESSAGE_STRING,
        "helpUri": {"type": "string", "format": "uri"},
        "defaultConfiguration": _object(
            [],
            {
                "enabled": {"type": "boolean"},
                "level": LEVEL,
                "rank": {"type": "number", "minimum": -1, "maximum": 100},
                "parameters": {"type": "object"},
                "properties": {"type": "object"},
            },
        ),
        "properties": {"type": "object"},
    },
)
_RUN = _object(
    ["tool"],
    {
        "tool": _object(
            ["driver"],
            {
                "driver": _object(
                    ["name"],
                    {
                        "name": {"type": "string"},
                        "version": {"type": "string"},
                        "semanticVersion": {"type": "string"},
                        "informationUri": {"type": "string", "format": "uri"},
                        "rules": {"type": "array", "items": _RULE},
                        "properties": {"type": "object"},
                    },
                ),
                "extensions": {"type": "array"},
                "properties": {"type": "object"},
            },
        ),
        "invocations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["executionSuccessful"],
                "properties": {"executionSuccessful": {"type": "boolean"}, "exitCode": {"type": "integer"}},
            },
        },
        "originalUriBaseIds": {"type": "object", "additionalProperties": _ARTIFACT_LOCATION},
        "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
        "results": {"type": "array", "items": _RESULT},
        "properties": {"type": "object"},
    },
)
SARIF_2_1_0 = _object(
    ["version", "runs"],
    {
        "$schema": {"type": "string", "format": "uri"},
        "version": {"enum": ["2.1.0"]},
        "runs": {"type": "array", "items": _RUN},
        "inlineExternalProperties": {"type": "array"},
        "properties": {"type": "object"},
    },
)
