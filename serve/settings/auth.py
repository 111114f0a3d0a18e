"""The ``auth`` section: API keys and admin keys, and the refusal to listen open on the network."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from steadyrank.serve.settings.base import Section, SettingsError

DEFAULT_KEYS_ENV = "STEADYRANK_API_KEYS"


class AuthSettings(Section):
    """Bearer API keys for the scoring routes (/v1/*), from ``api_keys``, the file ``keys_file`` and the
    variable ``api_keys_env`` (the union is accepted). No key anywhere = open, which the application
    allows on a loopback address only, unless ``allow_anonymous`` is true (:mod:`serve.server.hosting.exposure`)."""

    api_keys: list[SecretStr] = Field(default_factory=list, description="accepted keys")
    api_keys_env: str = Field(default=DEFAULT_KEYS_ENV, description="environment variable with more keys, comma-separated "
                                                            "(e.g. from a Kubernetes Secret through secretKeyRef)")
    keys_file: str | None = Field(
        default=None, description="file with more keys, one per line or comma-separated ('#' starts a comment), read at "
                          "start (e.g. a Kubernetes Secret mounted as a file); relative to the settings file; a file "
                          "without a key is an error")
    allow_anonymous: bool = Field(
        default=False, description="serve with no key on a non-loopback address (every route open to the network); "
                           "without it the application refuses such a bind (`steadyrank serve`, `serve run`, "
                           "`serve deploy`, KubeRay)")
    protect_metrics: bool = Field(default=False, description="also require a key on GET /metrics")
    admin_keys: list[SecretStr] = Field(
        default_factory=list,
        description="admin keys: accepted wherever api_keys are, and the only keys whose X-Golden-Query-Id header is "
                    "honoured for a query that is not that golden query's own text")
    admin_keys_env: str = Field(default="STEADYRANK_ADMIN_KEYS", description="environment variable with more admin keys, "
                                                                     "comma-separated")

    @field_validator("api_keys", "admin_keys")
    @classmethod
    def _clean(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for i, key in enumerate(keys):
            value = key.get_secret_value()
            if not value or value != value.strip() or any(c.isspace() for c in value):
                raise ValueError(f"api_keys[{i}] is empty or contains whitespace")
        return keys

    def file_keys(self) -> list[str]:
        """The keys of ``keys_file`` (none when unset); a missing or unreadable file is a SettingsError."""
        if self.keys_file is None:
            return []
        try:
            text = Path(self.keys_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"settings: auth.keys_file: cannot read {self.keys_file}: {exc}") from None
        lines = (line.split("#", 1)[0] for line in text.splitlines())
        keys = [key.strip() for line in lines for key in line.split(",") if key.strip()]
        if not keys:  # an empty Secret must not turn into "no key at all", i.e. every route open
            raise SettingsError(f"settings: auth.keys_file: {self.keys_file} holds no key (it is empty or holds only "
                                "comments): put one key a line in it, or unset auth.keys_file")
        return keys

    def resolved_keys(self, environ: dict[str, str] | None = None) -> list[str]:
        """Keys from the settings, the keys file and the environment (deduplicated, order kept)."""
        return _keys(self.api_keys, self.api_keys_env, environ, self.file_keys())

    def resolved_admin_keys(self, environ: dict[str, str] | None = None) -> list[str]:
        """Admin keys from the settings and the environment (deduplicated, order kept)."""
        return _keys(self.admin_keys, self.admin_keys_env, environ)

    def check_bind(self, host: str, environ: dict[str, str] | None = None, origin: str = "http.host, --host") -> int:
        """The number of active keys; a SettingsError when there are none, ``host`` (taken from
        ``origin``, named in the error) is not a loopback address and ``allow_anonymous`` is off."""
        count = len(self.resolved_keys(environ))
        if count == 0 and not self.allow_anonymous and not is_loopback(host):
            raise SettingsError(
                f"settings: auth: no API key is configured and the server would listen on {host!r} ({origin}), open "
                f"to the network: give keys (--api-key-file FILE, auth.keys_file, auth.api_keys or "
                f"${self.api_keys_env}), bind 127.0.0.1, or set auth.allow_anonymous: true")
        return count


def _keys(listed: list[SecretStr], env_name: str, environ: dict[str, str] | None,
          more: list[str] | None = None) -> list[str]:
    """``listed`` keys, then ``more`` (a keys file), then the comma-separated ones of ``$env_name``
    (deduplicated, order kept)."""
    env = os.environ if environ is None else environ
    keys = [k.get_secret_value() for k in listed] + (more or [])
    keys += [k.strip() for k in env.get(env_name, "").split(",") if k.strip()]
    return list(dict.fromkeys(keys))


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
