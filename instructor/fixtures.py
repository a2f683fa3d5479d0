"""``make fixtures``: record what the tests need from the reference solutions, as plain data.

The student's release ships no solutions, so everything a test (or a notebook) takes from the
reference is recorded here and committed under ``mini_vllm/testing/fixtures/``:

- ``api.json``: each lab's public names and signatures (the release checks its starters against it);
- ``lab07_replies.json.gz``: lab-02's reference StepOutput streams for lab-07's replies, reply texts
  drawn once from the tests' strategies with their streams, and the reference lab-07 event streams
  task 6 builds its bodies from;
- ``lab02_pipeline.json.gz``: the reference pipeline's outputs for each request lab-02's task-3
  tests make (they run your ChunkFormatter behind a replay of it);
- ``lab04_baseline.json``: what the textbook window-diff fallback (a correct, slow lab-04, kept out
  of the release) does in notebook 04;
- ``lab08_samples.json``: the reference ``StructuredSampler``'s choices (token, phase) for each of
  lab-08's task-5 replies (``SAMPLER_CASES``), which the tests compare a student's with.

``tests/test_fixtures.py`` rebuilds every file in memory and fails when one is stale.
Usage: ``make fixtures`` (``ARGS="--check"`` only reports, ``ARGS="--redraw"`` draws the texts again).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from mini_vllm.labs import LABS_DIR, REPO_ROOT, load_lab
from mini_vllm.testing import recorded
from mini_vllm.testing.api import public_api
from mini_vllm.testing.replies import REPLIES_FILE, ReplyRun, case_key
from mini_vllm.tokenizers.families import TOKENIZER_FAMILIES

# lab-07's replies: (user message, reply_run options). Every one is recorded for every family and step size.
REPLY_CASES: list[tuple[str, dict[str, Any]]] = [
    ("hello", {}), ("japanese", {}), ("emoji", {}), ("stop", {"stop": ("STOP",)}), ("think", {}),
    ("think", {"thinking": True}), ("think stop", {"stop": ("STOP",)}), ("think twice", {}),
    ("think", {"max_tokens": 12}), ("long", {"max_tokens": 40}), ("weather", {}), ("two tools", {}),
    ("write file", {}), ("think then call", {}), ("weather", {"max_tokens": 60}), ("weather", {"max_tokens": 80}),
    ("broken tool", {}),
]
STEP_SIZES = range(1, 9)
NOTEBOOK_CASES = [("bpe", "think then call", 16), ("bpe", "japanese", 8)]  # notebook 07
STREAM_SHAPES = [("bpe", 2), ("spm", 3), ("byte", 1)]  # (family, step size) of task 6's reference streams
THOUGHTS = ["", "<think>\nplan: call 🫨 </tool\n</think>\n\n"]  # no thought, or one first
TEXT_DRAWS = 64


def lab_dirs() -> list[Any]:
    return sorted(p for p in LABS_DIR.glob("lab-[0-9][0-9]-*") if (p / "solution.py").is_file())


def api_listing() -> dict[str, Any]:
    return {lab.name: public_api(load_lab(lab.name, "solution")) for lab in lab_dirs()}


def run_data(run: ReplyRun) -> dict[str, Any]:
    data: dict[str, Any] = {"steps": [recorded.step_to_data(s) for s in run.steps], "output_tokens": run.output_tokens}
    if run.error:
        data["error"] = run.error
    return data


def draw_texts() -> list[tuple[str, int]]:
    """Reply texts from the tests' own strategy, drawn once (derandomized) when the data is first recorded."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from mini_vllm.testing.strategies import WrittenReply, written_tool_call_replies

    drawn: list[tuple[str, int]] = []

    @settings(max_examples=TEXT_DRAWS, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(reply=written_tool_call_replies(), thought=st.sampled_from(THOUGHTS), k=st.integers(1, 8))
    def draw(reply: WrittenReply, thought: str, k: int) -> None:
        drawn.append((thought + reply.text, k))

    draw()
    return drawn


def lab07_replies(redraw: bool = False) -> dict[str, Any]:
    from instructor import replies as live

    runs: dict[str, Any] = {}
    for message, options in REPLY_CASES:
        for family in TOKENIZER_FAMILIES:
            for k in STEP_SIZES:
                runs[case_key(family, message, k, **options)] = run_data(live.reply_run(family, message, k, **options))
    for family, message, k in NOTEBOOK_CASES:
        runs[case_key(family, message, k)] = run_data(live.reply_run(family, message, k))
    try:
        texts = [(d["text"], d["tokens_per_step"]) for d in recorded.load(REPLIES_FILE)["texts"]]
    except FileNotFoundError:
        texts = []
    if redraw or not texts:  # the draws are data too: kept, so a new hypothesis version changes nothing here
        texts = draw_texts()
    drawn = [{"text": text, "tokens_per_step": k, "run": run_data(live.text_run("byte", text, k))}
             for text, k in texts]
    reference = load_lab("lab-07", "solution")
    streams: dict[str, Any] = {}
    for message, options in REPLY_CASES:
        for family, k in STREAM_SHAPES:
            run = live.reply_run(family, message, k, **options)
            for api in ("responses", "messages"):
                streams[f"{api} {case_key(family, message, k, **options)}"] = whole_stream(reference, api, run)
    return {"runs": runs, "texts": drawn, "streams": streams}


def whole_stream(reference: Any, api: str, run: ReplyRun) -> list[dict[str, Any]]:
    """The reference formatter's stream for ``run``, made as lab-07's tests make a whole stream."""
    if api == "responses":
        formatter = reference.ResponsesEventFormatter("resp_test", "mini-vllm", 1_700_000_000, input_tokens=7)
    else:
        formatter = reference.MessagesEventFormatter("msg_test", "mini-vllm", input_tokens=7, send_thinking=True)
    events: list[dict[str, Any]] = formatter.start()
    for step in run.steps:
        events += formatter.events(step)
    events += formatter.fail(run.error) if run.error else \
        formatter.finish(run.finish_reason, run.output_tokens, run.stop_reason)
    return events


def lab04_baseline() -> dict[str, Any]:
    """Notebook 04's figures for the textbook fallback (same inputs as the notebook's cells)."""
    from instructor.baselines import OriginalWindowDiff
    from mini_vllm import BPETokenizer, ByteTokenizer
    from mini_vllm.testing.tokenizers import CountingTokenizer

    bpe, byte_tok = BPETokenizer.from_file(), ByteTokenizer()

    def ids_per_token(tokenizer: Any, ids: list[int]) -> float:
        counting = CountingTokenizer(tokenizer)
        detok = OriginalWindowDiff(counting)
        for i in ids:
            detok.push(i)
        detok.flush()
        return round(counting.ids_decoded / len(ids), 3)

    original = OriginalWindowDiff(bpe, bpe.encode("Feeling"))
    pushes = [original.push(i) for i in bpe.encode("🫨")]
    cjk = byte_tok.encode("服务器每生成一个词元就立刻发送给用户。" * 200)
    ascii_ids = bpe.encode("The quick brown fox jumps over the lazy dog. " * 600)
    plot_cjk = byte_tok.encode("服务器每生成一个词元就立刻发送给用户。" * 300)
    sizes = [250, 500, 1000, 2000, 4000]
    return {"emoji_pushes": pushes, "emoji_flush": original.flush(),
            "cjk_growth": [[n, ids_per_token(byte_tok, cjk[:n])] for n in (300, 1200, 4800)],
            "plot_sizes": sizes,
            "plot": {"ASCII (BPE)": [ids_per_token(bpe, ascii_ids[:n]) for n in sizes],
                     "CJK (byte tokens)": [ids_per_token(byte_tok, plot_cjk[:n]) for n in sizes]}}


def lab02_pipeline() -> dict[str, Any]:
    from instructor.pipeline_recording import record_lab02_requests

    return record_lab02_requests()


def lab08_samples() -> dict[str, Any]:
    from mini_vllm.testing.structured import SAMPLER_CASES, sampler_run

    reference = load_lab("lab-08", "solution")
    return {name: [list(step) for step in sampler_run(case, reference.StructuredSampler)]
            for name, case in SAMPLER_CASES.items()}


# file name -> (how to make its data, whether it is gzipped)
FILES: dict[str, tuple[Callable[[], Any], bool]] = {
    "api.json": (api_listing, False),
    REPLIES_FILE: (lab07_replies, True),
    "lab02_pipeline.json.gz": (lab02_pipeline, True),
    "lab04_baseline.json": (lab04_baseline, False),
    "lab08_samples.json": (lab08_samples, False),
}


def build(name: str) -> bytes:
    make, compress = FILES[name]
    return recorded.encode(make(), compress)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make fixtures", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which files are stale (exit 1 if any)")
    parser.add_argument("--redraw", action="store_true", help="draw lab-07's reply texts again")
    parser.add_argument("--only", action="append", choices=sorted(FILES), help="one file (repeatable)")
    args = parser.parse_args(argv)
    recorded.FIXTURES_DIR.mkdir(exist_ok=True)
    stale = []
    for name in args.only or FILES:
        path = recorded.FIXTURES_DIR / name
        content = recorded.encode(lab07_replies(args.redraw), True) if name == REPLIES_FILE else build(name)
        current = path.is_file() and path.read_bytes() == content
        if not current:
            stale.append(name)
            if not args.check:
                path.write_bytes(content)
        print(f"{path.relative_to(REPO_ROOT)}: {'current' if current else 'stale' if args.check else 'written'}"
              f" ({len(content):,} bytes)")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
