"""The chaos harness: fresh servers, injected faults, and a verdict on every request.

| module | what |
|---|---|
| `scenario` | the shape of a scenario: target, faults, load, accepted endings (`Scenario`, `Expect`, `Ctx`) |
| `target` | what a scenario runs against: a `Target` turns a `Launch` into the server's command |
| `scenarios/` | the scenario table, one module per target (`pipeline`: the reference server) |
| `harness` | runs one scenario: start, load, judge every outcome, watch what is left behind |
| `loadgen` | the raw asyncio HTTP/SSE/WebSocket client the loads use |
| `watch` | processes and shared memory seen from outside (also used by the test suites) |
| `report` | the result record, the table, the progress bar |
| `plot` | `--plot`: requests answered over time |
| `command` | `omni-errors chaos` |

Nothing here is imported by the library itself; importing the package imports nothing heavy.
"""
