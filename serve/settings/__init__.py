"""Server settings: one pydantic model, read from a YAML or JSON file, validated at start.

Every section has defaults; ``Settings()`` is the embedded default (bundled MiniLM embedder, the demo
corpus indexed on first start, reranking by the embedder's FP32 HPS scores, golden evaluator on).
``deploy/settings.yaml`` documents every field. Errors name the field, e.g.
``settings deploy/settings.yaml: deployments.reranker.num_cpus: Input should be greater than or equal to 0``.

Relative paths in a settings file are resolved against the file's directory. API keys come from
``auth.api_keys``, the file ``auth.keys_file`` and/or the environment variable named by
``auth.api_keys_env`` (default ``STEADYRANK_API_KEYS``, comma-separated); the union is accepted.
"""

from steadyrank.serve.settings.admission import AdmissionSettings
from steadyrank.serve.settings.auth import DEFAULT_KEYS_ENV, AuthSettings, is_loopback
from steadyrank.serve.settings.base import Section, SettingsError
from steadyrank.serve.settings.chunking import ChunkingSettings
from steadyrank.serve.settings.deployments import (
    AutoscalingSettings,
    BatchedDeploymentSettings,
    DeploymentSettings,
    DeploymentsSettings,
    Layout,
    derive_max_batch_size,
)
from steadyrank.serve.settings.http import HttpSettings
from steadyrank.serve.settings.index import IndexSettings
from steadyrank.serve.settings.limits import LimitsSettings
from steadyrank.serve.settings.loading import ENV_SETTINGS, check_files, format_validation_error, load_settings, read_settings_file
from steadyrank.serve.settings.quality import QualitySettings
from steadyrank.serve.settings.root import ENV_CACHE, Settings
from steadyrank.serve.settings.routing import RoutingSection, Signal
from steadyrank.serve.settings.search import DenoiseLlmSettings, SearchSettings
from steadyrank.serve.settings.served import ServedEmbedderNames, ServedRerankerNames, ServedSettings
from steadyrank.serve.settings.server import ServerSettings
from steadyrank.serve.settings.telemetry import TelemetrySettings

__all__ = [
    "DEFAULT_KEYS_ENV", "ENV_CACHE", "ENV_SETTINGS", "AdmissionSettings", "AuthSettings", "AutoscalingSettings",
    "BatchedDeploymentSettings",
    "ChunkingSettings", "DenoiseLlmSettings", "DeploymentSettings", "DeploymentsSettings", "HttpSettings", "IndexSettings",
    "Layout",
    "LimitsSettings", "QualitySettings", "RoutingSection", "SearchSettings", "Section", "ServedEmbedderNames",
    "ServedRerankerNames", "ServedSettings", "ServerSettings", "Settings", "SettingsError", "Signal", "TelemetrySettings",
    "check_files", "derive_max_batch_size", "format_validation_error", "is_loopback", "load_settings", "read_settings_file",
]
