"""The bench's routing section alone, in whichever tree runs it: one JSON line of stage p50s.

``scripts/routing_overhead_vs.sh REF`` runs it in turn here and in a worktree of an older commit, so a change's
routing overhead is read side by side on one machine, not against a figure from another day. The encoder is the
torch one unless the tree has the bench's ONNX export step and ``--onnx`` is given (older trees have none).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    from bench.common import FULL, isolate
    from tandem.processes import free_port

    root = Path(tempfile.mkdtemp(prefix="tandem-routing-"))
    homes = isolate(root, free_port())
    if "--onnx" in argv:
        from bench import encoders

        encoders.ensure_export(homes, root / "onnx", lambda line: None)
    from bench import routing
    from chains.bootstrap import bootstrap
    from chains.runtime import build_runtime
    from core.settings import get_settings

    settings = get_settings()
    runtime = build_runtime(settings, use_llm=False)
    for _ in bootstrap(settings, runtime.kb, db=runtime.db):
        pass
    timings = routing.run_routing(runtime, FULL, lambda line: None)
    print(json.dumps({"overhead_p50": timings["routing_overhead_ms"]["p50"],
                      **{stage: row["p50"] for stage, row in timings["stages_ms"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
