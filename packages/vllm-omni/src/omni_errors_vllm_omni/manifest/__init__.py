"""Every attribute of vLLM-Omni (and vLLM) the plugin replaces, as data: one `Target` per attribute,
kept by the process the patched code runs in (`api_server`, `stage`, `worker`, `launcher`,
`every_process`; what several share: `names`; the vocabulary: `model`).

The code that patches (`omni_errors_vllm_omni.register`), the check before it (`verify`), the
generated table in docs/vllm-omni.md (`render_table`), `omni-errors doctor` and the drift suite
(`tests/vllm_omni/test_manifest.py`) all read `TARGETS`. Importing this module imports nothing
but the standard library: it runs in every process vLLM loads plugins in.

An entry names:

- where: `module` (whose attribute is replaced), `owner` (a class in it, or None for a module
  attribute) and `name`; `defined_in` when the original is written elsewhere and imported there;
- how: `patch`, "file:function" of this package, a factory `(module, original) -> replacement`;
  `kind`, whether the replacement calls the original (`WRAP`), calls it unless its guard answers
  first (`GUARD`), or stands in for it (`REPLACE`);
- what it relies on: `relies_on`, the attributes it reads or writes that upstream could rename
  ("[module:]Owner.attr", `Owner` a class in the target's module unless a module is given; for a
  function owner, `attr` is the dotted path it assigns, e.g. `serve_http.app.state.server`), and
  `in_except`, the calls upstream makes inside an `except` block that the patch counts on;
- against what: `fingerprints`, release -> the fingerprint of the original's normalised AST
  (`omni-errors doctor --json` prints the installed one); a target whose installed source has
  another fingerprint refuses the plugin. A `public` target is a documented API of another
  library (pyzmq's `Socket.bind`, say), wrapped the same way whatever its version: only its
  presence is checked;
- where it runs: `process`, the process the patched code runs in (`Process`), and `hop`, the leg of
  the record's route from a failing stage to its client, or the duty beside that route, it serves
  (`Hop`);
- and why: `does` and `upstream`, the change in vLLM-Omni that would make it unnecessary;
- once that change is written (the series in `upstream/vllm-omni/`, docs/upstream.md): `upstreamed`,
  release -> the fingerprint after the series of the definition that shows it (`upstreamed_at`,
  "module:Qual", when it is not the target's original), None where the series deletes it. A target
  whose installed source shows it is *upstreamed*: the plugin patches nothing there.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest import api_server, every_process, launcher, stage, worker
from omni_errors_vllm_omni.manifest.model import Hop, InExcept, Kind, Process, Target

__all__ = ["TARGETS", "Hop", "InExcept", "Kind", "Process", "Target", "render_table", "targets_by_module"]

#: Every target, process by process (in `Process` order; within a module, the order they apply).
TARGETS: tuple[Target, ...] = (
    *api_server.TARGETS,
    *stage.TARGETS,
    *worker.TARGETS,
    *launcher.TARGETS,
    *every_process.TARGETS,
)


def targets_by_module() -> dict[str, list[Target]]:
    """The targets grouped by the module whose import applies them, in manifest order."""
    grouped: dict[str, list[Target]] = {}
    for target in TARGETS:
        grouped.setdefault(target.module, []).append(target)
    return grouped


_TABLE_BEGIN = "<!-- patch table: generated from omni_errors_vllm_omni/manifest/ by `render_table()`; "
_TABLE_END = "<!-- end of the generated patch table -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table() -> str:
    """The patch table of docs/vllm-omni.md (Markdown): one table per process, in `Process` order, one
    row per target, in manifest order."""
    lines = [_TABLE_BEGIN + "tests/vllm_omni/test_manifest_doc.py fails when it drifts -->"]
    for process in Process:
        targets = [t for t in TARGETS if t.process is process]
        if not targets:
            continue
        lines += [
            "",
            f"### {process.value[0].upper()}{process.value[1:]}",
            "",
            "| hop | patched | kind | relies on | what the patch does | upstream change that replaces it |",
            "|---|---|---|---|---|---|",
        ]
        for target in targets:
            relies = [f"`{r.partition(':')[2] or r}`" for r in target.relies_on] + [str(c) for c in target.in_except]
            where = f"`{target.module}.{target.qualname}`"
            kind = f"{target.kind.value} (public API)" if target.public else target.kind.value
            lines.append(
                f"| {target.hop.value} | {where} | {kind} | {_cell(', '.join(relies) or '-')} "
                f"| {_cell(target.does)} | {_cell(target.upstream)} |"
            )
    lines += ["", _TABLE_END]
    return "\n".join(lines) + "\n"
