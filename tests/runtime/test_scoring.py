"""Every model kind loads and scores; scores match an independent forward pass; batching is inert."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from steadyrank.serve.runtime import ModelSettings, load_embedder, load_scorer
from steadyrank.serve.runtime.settings import DEFAULT_INSTRUCTION, QWEN3_RERANKER_TEMPLATE

QUERY = "what is the fahrenheit scale"
DOCS = [
    "the fahrenheit scale measures temperature",
    "cats sleep most of the day " * 12,
    "mercury thermometer",
    "daniel gabriel fahrenheit was a physicist who invented the alcohol thermometer in 1709 " * 3,
    "",
]
FP32 = ModelSettings(precision="fp32")  # compared with FP32 references (the default, auto, may pick bf16)


def test_minilm_embeddings_match_sentence_transformers(minilm_path: Path) -> None:
    embedder = load_embedder(FP32)
    ours = embedder.encode(DOCS)
    theirs = SentenceTransformer(str(minilm_path), device="cpu").encode(DOCS, normalize_embeddings=True)
    assert ours.dtype == np.float32 and ours.shape == (len(DOCS), embedder.dim)
    np.testing.assert_allclose(ours, theirs, atol=2e-6)


def test_bi_encoder_scorer_is_fp32_dot_of_embeddings() -> None:
    embedder = load_embedder(FP32)
    out = load_scorer(FP32).rerank(QUERY, DOCS)
    q, d = embedder.encode([QUERY]), embedder.encode(DOCS)
    np.testing.assert_allclose(out.scores, (d @ q[0]).astype(np.float32), atol=1e-6)
    assert np.array_equal(out.logits[:, 0], out.scores)
    assert list(out.order) == list(np.argsort(-out.scores, kind="stable"))


@pytest.mark.parametrize("num_labels", [1, 2])
def test_cross_encoder_score_is_phi_of_the_model_logits(make_cross_encoder, num_labels: int) -> None:
    path = make_cross_encoder(num_labels=num_labels)
    out = load_scorer(ModelSettings(path=str(path), precision="fp32")).rerank(QUERY, DOCS)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    with torch.no_grad():
        logits = torch.cat([model(**tok([QUERY], [d], return_tensors="pt")).logits for d in DOCS])
    np.testing.assert_allclose(out.logits, logits.numpy(), atol=1e-5)
    phi = torch.sigmoid(logits[:, 0]) if num_labels == 1 else torch.softmax(logits, -1)[:, 1]
    np.testing.assert_allclose(out.scores, phi.numpy(), atol=1e-6)
    assert out.logits.shape == (len(DOCS), num_labels) and out.scores.dtype == np.float32


def test_causal_lm_score_is_softmax_over_no_yes(causal_lm: Path) -> None:
    out = load_scorer(ModelSettings(path=str(causal_lm), precision="fp32")).rerank(QUERY, DOCS[:3])
    tok = AutoTokenizer.from_pretrained(str(causal_lm))
    model = AutoModelForCausalLM.from_pretrained(str(causal_lm)).eval()
    no_id, yes_id = tok.convert_tokens_to_ids(["no", "yes"])
    template = QWEN3_RERANKER_TEMPLATE.replace("{instruction}", DEFAULT_INSTRUCTION).replace("{query}", QUERY)
    for i, doc in enumerate(DOCS[:3]):
        ids = tok(template.replace("{document}", doc), add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            last = model(**ids).logits[0, -1]
        pair = torch.stack([last[no_id], last[yes_id]])
        np.testing.assert_allclose(out.logits[i], pair.numpy(), atol=1e-5)
        assert out.scores[i] == pytest.approx(torch.softmax(pair, -1)[1].item(), abs=1e-6)


def test_fp32_score_does_not_depend_on_batch_companions(cross_encoder_1: Path, causal_lm: Path) -> None:
    for path in (cross_encoder_1, causal_lm):
        whole = load_scorer(ModelSettings(path=str(path), batch_tokens=100_000))
        alone = load_scorer(ModelSettings(path=str(path), batch_size=1))  # one pair per batch
        together, _, _ = whole.score_pairs([(QUERY, d) for d in DOCS])
        single = np.array([alone.score_pairs([(QUERY, d)])[0][0] for d in DOCS])
        np.testing.assert_allclose(together, single, rtol=1e-5, atol=1e-6)
    embedder = load_embedder(ModelSettings(batch_tokens=100_000))
    np.testing.assert_allclose(
        embedder.encode(DOCS), np.vstack([embedder.encode([d]) for d in DOCS]), rtol=1e-5, atol=1e-6
    )


def test_low_precision_scores_come_back_float32(cross_encoder_1: Path) -> None:
    for precision in ("bf16", "fp16"):
        scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), precision=precision))
        scores, logits, truncated = scorer.score_pairs([(QUERY, d) for d in DOCS])
        assert scores.dtype == logits.dtype == np.float32 and truncated.dtype == bool
        assert scorer.precision == precision and scorer.kind == "cross-encoder"


def test_bf16_native_embeddings_tie_where_hps_does_not() -> None:
    texts = [f"passage number {i} about thermometers and temperature scales" for i in range(64)]
    query = "who invented the thermometer"
    native = load_scorer(ModelSettings(precision="bf16", scoring="native")).rerank(query, texts)
    hps = load_scorer(ModelSettings(precision="bf16")).rerank(query, texts)
    assert len(native.tie_groups) > 0
    assert np.unique(hps.scores).size > np.unique(native.scores).size
    assert np.array_equal(native.scores, torch.from_numpy(native.scores).bfloat16().float().numpy())


def test_cross_encoder_runs_sdpa_attention_with_eager_attention_scores(cross_encoder_1: Path) -> None:
    """The runtime's encoders run transformers' SDPA attention (``benchmarks/bench_engine.py``: on a
    BERT-base cross-encoder with 300–500-token passages the eager attention was slower; see
    benchmarks/README.md), and SDPA's FP32 scores are eager attention's (one pair at a time:
    no padding) within rounding, with padded batches of several lengths."""
    from steadyrank.serve.runtime.scorer import PairScorer
    from steadyrank.serve.runtime.transformers_backend import TransformersBackend, model_config

    scorer = load_scorer(ModelSettings(path=str(cross_encoder_1), precision="fp32", max_padding=1.0))
    assert isinstance(scorer, PairScorer) and isinstance(scorer.backend, TransformersBackend)
    assert model_config(scorer.backend.model)._attn_implementation == "sdpa"
    tok = AutoTokenizer.from_pretrained(str(cross_encoder_1))
    eager = AutoModelForSequenceClassification.from_pretrained(str(cross_encoder_1), attn_implementation="eager").eval()
    with torch.no_grad():
        logits = torch.cat([eager(**tok([QUERY], [d], return_tensors="pt")).logits for d in DOCS])
    np.testing.assert_allclose(scorer.score_pairs([(QUERY, d) for d in DOCS])[1], logits.numpy(), atol=1e-5)


def test_the_padding_bound_follows_the_device_unless_set(cross_encoder_1: Path, monkeypatch) -> None:
    """``max_padding: null`` is 0.1 on a CPU and 1.0 on a GPU (one padded batch: an H100 forward of 20
    long passages is launch-bound); a value the user sets wins on both; the CPU backend hands the
    bound to the batch planner."""
    from steadyrank.serve.runtime import transformers_backend
    from steadyrank.serve.runtime.settings import CPU_MAX_PADDING, GPU_MAX_PADDING

    assert (ModelSettings().padding_bound("cpu"), ModelSettings().padding_bound("cuda")) == (CPU_MAX_PADDING, GPU_MAX_PADDING)
    assert (CPU_MAX_PADDING, GPU_MAX_PADDING) == (0.1, 1.0)
    assert {ModelSettings(max_padding=0.5).padding_bound(d) for d in ("cpu", "cuda")} == {0.5}
    seen: list[float] = []
    planned = transformers_backend.run_batched_many

    def spy(*args, **kwargs):
        seen.append(kwargs["max_padding"])
        return planned(*args, **kwargs)

    monkeypatch.setattr(transformers_backend, "run_batched_many", spy)
    load_scorer(ModelSettings(path=str(cross_encoder_1), precision="fp32", torchscript=False)).score_pairs([(QUERY, DOCS[0])])
    assert seen and set(seen) == {CPU_MAX_PADDING}
