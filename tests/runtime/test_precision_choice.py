"""``precision: auto`` resolution and the int8 refusals, on fake CPU flag sets (no torch, no model)."""

from __future__ import annotations

import pytest

from steadyrank.serve.errors import UnsupportedModelError
from steadyrank.serve.runtime.precision import (
    choose,
    choose_for,
    cpu_bf16_unit,
    cpu_flags,
    int8_engine,
    parse_cpu_flags,
)
from steadyrank.serve.runtime.settings import ModelSettings

SAPPHIRE_RAPIDS = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"})
COOPER_LAKE = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})
SKYLAKE = frozenset({"avx2", "avx512f"})
ALDER_LAKE = frozenset({"avx2", "avx_vnni"})

CPUINFO = """processor\t: 0
flags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile
bogomips\t: 4000

processor\t: 1
flags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile avx512_vnni
"""


def test_parse_cpu_flags_unions_every_processor() -> None:
    assert parse_cpu_flags(CPUINFO) == {"fpu", "sse", "avx2", "avx512f", "amx_bf16", "amx_tile", "avx512_vnni"}
    assert parse_cpu_flags("processor : 0\nmodel name : x\n") == frozenset()


@pytest.mark.parametrize(("flags", "precision", "unit"), [
    (SAPPHIRE_RAPIDS, "bf16", "AMX-BF16"),
    (COOPER_LAKE, "bf16", "AVX512-BF16"),
    (SKYLAKE, "fp32", None),
    (ALDER_LAKE, "fp32", None),
    (frozenset(), "fp32", None),
])
def test_auto_on_cpu_picks_bf16_only_with_a_bf16_unit(flags: frozenset[str], precision: str, unit: str | None) -> None:
    choice = choose("auto", "cpu", flags=flags)
    assert (choice.requested, choice.precision) == ("auto", precision)
    if unit is not None:
        assert unit in choice.reason
    else:
        assert "emulated" in choice.reason
    assert choice.line().startswith(f"auto → {precision} (")


@pytest.mark.parametrize(("cuda_bf16", "precision"), [(True, "bf16"), (False, "fp32")])
def test_auto_on_cuda_follows_native_bf16(cuda_bf16: bool, precision: str) -> None:
    # the CPU's flags do not matter for a model on the GPU
    assert choose("auto", "cuda", flags=SAPPHIRE_RAPIDS, cuda_bf16=cuda_bf16).precision == precision


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_explicit_precisions_are_kept_everywhere(precision: str) -> None:
    for device, flags in (("cpu", SKYLAKE), ("cpu", SAPPHIRE_RAPIDS), ("cuda", frozenset())):
        choice = choose(precision, device, flags=flags)
        assert choice.precision == precision
        assert choice.line() == f"{precision} (set in the settings)"


def test_int8_names_the_int8_unit() -> None:
    assert "AMX-INT8" in choose("int8", "cpu", flags=SAPPHIRE_RAPIDS).reason
    assert "AVX512-VNNI" in choose("int8", "cpu", flags=COOPER_LAKE).reason
    assert "AVX-VNNI" in choose("int8", "cpu", flags=ALDER_LAKE).reason
    assert "slow" in choose("int8", "cpu", flags=SKYLAKE).reason


def test_int8_weights_are_packed_by_onednn_only_on_amx_int8() -> None:
    engines = ("qnnpack", "onednn", "x86", "fbgemm")
    assert int8_engine(SAPPHIRE_RAPIDS, engines) == "onednn"
    assert "(oneDNN)" in choose("int8", "cpu", flags=SAPPHIRE_RAPIDS).reason
    assert int8_engine(SAPPHIRE_RAPIDS, ("x86", "fbgemm")) == "x86"  # a torch build without oneDNN
    for flags in (COOPER_LAKE, ALDER_LAKE, SKYLAKE):
        assert int8_engine(flags, engines) == "x86"
        assert "oneDNN" not in choose("int8", "cpu", flags=flags).reason


def test_int8_is_refused_on_cuda_and_other_backends() -> None:
    with pytest.raises(UnsupportedModelError, match="int8 runs on a CPU only.*use bf16 or fp16"):
        choose("int8", "cuda", cuda_bf16=True)
    with pytest.raises(UnsupportedModelError, match="int8 needs the transformers backend, not 'vllm'"):
        choose("int8", "cpu", flags=SAPPHIRE_RAPIDS, backend="vllm")


def test_auto_is_the_default_of_every_model() -> None:
    assert ModelSettings().precision == "auto"
    assert ModelSettings(path="/models/x", kind="cross-encoder").precision == "auto"


def test_this_machine_resolves_from_its_own_flags() -> None:
    """On this machine, CPU-only: auto is bf16 exactly when /proc/cpuinfo names a BF16 unit."""
    choice = choose_for("auto", "cpu")
    assert choice.precision == ("bf16" if cpu_bf16_unit(cpu_flags()) else "fp32")


def test_serve_start_line_names_each_models_choice() -> None:
    from steadyrank.serve.cli.commands.serve import _precision_line
    from steadyrank.serve.settings import load_settings

    auto = choose_for("auto", "cpu").line()
    assert _precision_line(load_settings({"embedder": {"device": "cpu"}})) == f"embedder {auto}"
    settings = load_settings({"embedder": {"device": "cpu", "precision": "fp32"},
                              "reranker": {"path": "/models/r", "device": "cpu", "precision": "int8"}})
    assert _precision_line(settings).startswith("embedder fp32 (set in the settings); reranker int8 (dynamic int8")
