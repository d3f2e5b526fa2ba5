"""One Inspect run of a checkout's task with the scripted mockllm/model of tools_evidence.py.

    CHECKOUT/.venv/bin/python benchmarks/_mock_eval.py CHECKOUT LOG_DIR [TOOLS] [MAX_TOOL_CALLS]

Run with the checkout's own Python (its sphyr_hpc is imported, not this file's checkout: nothing
here touches sys.path), from any folder.  The model answers each v1/full_easy record with its ground
truth (index % 3 == 0), the empty grid (1) or prose (2); given ``simulate`` it first calls it on that
answer, and answers the ground truth instead where the tool said the load path is severed.  Prints
the log's path.
"""

import contextlib
import json
import sys
from pathlib import Path

from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatMessageTool, ChatMessageUser, ModelOutput, ModelUsage, get_model

MODEL = "mockllm/model"
PROSE = "The load should travel down to the supports through a solid column of material."


def grid_text(grid):
    return "\n".join(" ".join(row) for row in grid)


def main(checkout, log_dir, tools=None, max_tool_calls=None):
    dataset = Path(checkout) / "examples" / "data" / "v1" / "full_easy.jsonl"
    records = [json.loads(line) for line in dataset.read_text().splitlines()]

    def first_answer(record):
        kind = record["index"] % 3
        if kind == 0:
            return grid_text(record["ground_truth"])
        if kind == 1:
            return grid_text([["0" if c == "V" else c for c in row] for row in record["input_grid"]])
        return PROSE

    def record_of(messages):
        prompt = next(m.text for m in messages if isinstance(m, ChatMessageUser))
        grid = prompt.split("masked regions:\n\n", 1)[1].split("\n\nPlease output", 1)[0]
        return next(r for r in records if grid_text(r["input_grid"]) == grid)

    def answer(messages, tool_infos, tool_choice, config):
        record = record_of(messages)
        results = [json.loads(m.text) for m in messages if isinstance(m, ChatMessageTool)]
        if tool_infos and tool_choice != "none" and not results:
            output = ModelOutput.for_tool_call(MODEL, "simulate", {"grid": first_answer(record)})
        elif any(r.get("failure") == "severed_load_path" for r in results):
            output = ModelOutput.from_content(MODEL, grid_text(record["ground_truth"]))
        else:
            output = ModelOutput.from_content(MODEL, first_answer(record))
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    args = {"dataset": str(dataset), "store": "none"}
    if tools:
        args.update(tools=tools, max_tool_calls=int(max_tool_calls or 10))
    with contextlib.chdir(checkout):  # Inspect takes a task file's path relative to the working folder
        (log,) = inspect_eval("sphyr_hpc/inspect/task.py", model=get_model(MODEL, custom_outputs=answer),
                              task_args=args, log_dir=str(Path(log_dir).resolve()), display="none")
    if log.status != "success":
        sys.exit(f"{log.location}: {log.status}: {log.error}")
    print(log.location)


if __name__ == "__main__":
    main(*sys.argv[1:])
