"""Provides which proxy the environment names for an endpoint, read as curl reads it (policy, not an HTTP client)."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

    IPAddress = IPv4Address | IPv6Address


class BadProxy(ValueError):
    """A proxy named by the environment that mnemo cannot use."""


class Proxy:
    """An `http://` proxy: where to connect, and the `Proxy-Authorization` its URL's credentials make."""

    __slots__ = ("authorization", "host", "port")

    def __init__(self, host: str, port: int, authorization: str | None) -> None:
        self.host = host
        self.port = port
        self.authorization = authorization


def _bypassed(host: str, address: IPAddress | None, port: int, no_proxy: str) -> bool:
    """Whether `NO_PROXY` names the endpoint, as curl reads it: `*`, the host, a domain it is in
    (`example.com`, `.example.com`), either with `:port` (then only that port), an address range
    (`10.0.0.0/8`); a `scheme://` in front of an entry is ignored."""
    import ipaddress

    for raw in no_proxy.replace(" ", "").lower().split(","):
        entry = raw.split("://", 1)[-1].rstrip("/")
        if entry == "*":
            return True
        name, _, wanted = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if wanted and wanted != str(port):
            continue
        name = name.strip("[]").lstrip(".")
        if not name:
            continue
        if address is not None and "/" in name:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False


def proxy_for(scheme: str, host: str, environ: Mapping[str, str], port: int | None = None) -> Proxy | None:
    """The proxy the environment names for an endpoint (`<scheme>_proxy`, then `all_proxy`, each in either case).

    A loopback endpoint is never proxied (a proxy's loopback is not this machine's), nor one `NO_PROXY` names.

    Raises:
        BadProxy: a proxy URL that is not `http://host[:port]`.
    """
    import ipaddress

    host = host.lower()
    port = port or (443 if scheme == "https" else 80)
    try:
        address: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    loopback = host == "localhost" or host.endswith(".localhost") or (address is not None and address.is_loopback)
    if loopback or _bypassed(host, address, port, environ.get("no_proxy") or environ.get("NO_PROXY") or ""):
        return None
    url = ""
    for name in (f"{scheme}_proxy", "all_proxy"):
        url = environ.get(name) or environ.get(name.upper()) or ""
        if url:
            break
    if not url:
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    try:
        port = parts.port or 80
    except ValueError:
        port = 0
    if parts.scheme != "http" or not parts.hostname or not port:
        shown = f"{parts.scheme}://{parts.hostname or ''}"
        raise BadProxy(f"the proxy {shown} from the environment is not an http:// proxy, the only kind mnemo uses")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + binascii.b2a_base64(pair, newline=False).decode()
    return Proxy(parts.hostname, port, authorization)
