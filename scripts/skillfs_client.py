#!/usr/bin/env python3
"""A client of the skillfs HTTP API, in one file of standard-library Python.

Copy it next to an agent runtime or a tool loader. It speaks to the daemon
over a Unix socket (the daemon's own, or a session's socket inside a sandbox)
or over its loopback TCP listener, with an optional bearer token (the TCP
listener's token, a platform token, or a session's token):

    from skillfs_client import Client

    c = Client(socket="/var/lib/skillfs/skillfs.sock")
    s = c.create_session("alice", skills=["release-notes"])
    print(c.prompt(s["id"]))
    for event in c.events(s["id"], after=0):
        print(event["type"], event.get("slug"))

Every method returns the API's answer as it is: decoded JSON for a JSON
answer, text for the prompt, bytes for a resolved file. A refused request
raises SkillfsError, which carries the API's error body
({"error": ..., "code": ...}) and the HTTP status. The wire is described in
cmd/skillfs/api/API.md and cmd/skillfs/api/openapi.json.

Run as a program it is a small command line over the same methods, printing
JSON (text for prompt and resolve), for shell tools:

    python3 skillfs_client.py --socket /home/gem/skillfs.sock activations ID
    python3 skillfs_client.py --url http://127.0.0.1:7070 --token-file F show ID

It exits 0 on success and, on a refused request, with the code the skillfs
command line gives the same error kind (3 not found, 4 permission, 5 bad
input, 6 conflict, 8 damaged, 9 unavailable, 10 busy, 1 any other), printing
the error's JSON on standard error; 7 when the daemon cannot be reached, 2
for a bad command line.

Python 3.9 or later; nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import time
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Union

__all__ = ["Client", "SkillfsError", "UnixHTTPConnection", "parse_sse"]

# The header naming the user a catalog call acts for (the daemon's operator
# credential only; a session's credential may not send it).
ACT_AS_HEADER = "X-Skillfs-As"

# Exit codes of the command line by the API's error code, as the skillfs
# command line has them (README, "Exit codes").
EXIT_CODES = {
    "not_found": 3,
    "permission": 4,
    "invalid": 5,
    "conflict": 6,
    "damaged": 8,
    "unavailable": 9,
    "busy": 10,
}
EXIT_NO_DAEMON = 7
EXIT_USAGE = 2


class SkillfsError(Exception):
    """A request the API refused.

    Attributes:
        status: the HTTP status (404, 403, ...).
        code: the error's kind as the API names it ("not_found",
            "permission", "invalid", "conflict", "damaged", "unavailable",
            "busy", "internal"); "" when the answer was not in the error shape.
        message: the error's text.
        body: the error's JSON as the API sent it (a dict), or {} when it
            sent no JSON.
        retry_after: the Retry-After header's seconds on a "busy" answer,
            else None.
    """

    def __init__(self, status: int, body: Mapping[str, Any], text: str = "", retry_after: Optional[float] = None):
        self.status = status
        self.body = dict(body)
        self.code = str(self.body.get("code", ""))
        self.message = str(self.body.get("error", text))
        self.retry_after = retry_after
        super().__init__("%s (HTTP %d%s)" % (self.message, status, ", " + self.code if self.code else ""))


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection over a Unix socket at path."""

    def __init__(self, path: str, timeout: Optional[float] = None):
        super().__init__("skillfs", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def parse_sse(lines: Iterable[bytes]) -> Iterator[Dict[str, str]]:
    """Parse a server-sent event stream.

    lines are the stream's lines (bytes, with or without their line end).
    Each event is yielded when its blank line arrives, as a dict of its
    fields: "id", "event" and "data" (data lines joined by newlines), only
    those present. Comment lines (": keep-alive") are skipped. This is the
    part of the EventSource rules the skillfs stream uses: one "id:",
    "event:" and "data:" line per event.
    """
    fields: Dict[str, str] = {}
    data: List[str] = []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                fields["data"] = "\n".join(data)
            if fields:
                yield fields
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name in ("id", "event", "retry"):
            fields[name] = value


class Client:
    """A client of one skillfs daemon.

    Give one of socket (the path of a Unix socket: the daemon's
    skillfs.sock, or a session's socket in a sandbox) and url
    ("http://127.0.0.1:PORT", the daemon's --listen address). token is sent
    as "Authorization: Bearer TOKEN" on every request: needed on the TCP
    listener, and to act with a session's or a platform token's rights on
    the daemon's socket. act_as names the user catalog calls act for
    (X-Skillfs-As; the daemon's operator credential only). timeout bounds
    each request's connect and reads, in seconds; event streams are not
    bound by it (see events).
    """

    def __init__(
        self,
        socket: Optional[str] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        act_as: Optional[str] = None,
        timeout: Optional[float] = 30.0,
    ):
        if (socket is None) == (url is None):
            raise ValueError("give one of socket and url")
        self.socket = socket
        self.host = self.port = None
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname or u.path not in ("", "/"):
                raise ValueError("url %r: want http://HOST:PORT" % url)
            self.host, self.port = u.hostname, u.port or 80
        self.token = token
        self.act_as = act_as
        self.timeout = timeout
        # The id of the last event the events generator yielded.
        self.last_event_id: Optional[int] = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Client":
        """A client from SKILLFS_SOCKET or SKILLFS_URL, with the token of
        SKILLFS_TOKEN or the file SKILLFS_TOKEN_FILE names, if any."""
        token = environ.get("SKILLFS_TOKEN") or None
        if token is None and environ.get("SKILLFS_TOKEN_FILE"):
            token = read_token(environ["SKILLFS_TOKEN_FILE"])
        url = environ.get("SKILLFS_URL") or None
        sock = environ.get("SKILLFS_SOCKET") or None
        if url is None and sock is None:
            raise ValueError("set SKILLFS_SOCKET or SKILLFS_URL")
        return cls(socket=sock if url is None else None, url=url, token=token)

    # The wire.

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.socket is not None:
            return UnixHTTPConnection(self.socket, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"Connection": "close"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if self.act_as:
            h[ACT_AS_HEADER] = self.act_as
        if extra:
            h.update(extra)
        return h

    def _open(self, method: str, path: str, body: Optional[bytes] = None,
              headers: Optional[Mapping[str, str]] = None,
              timeout: Optional[float] = None, stream: bool = False):
        """Send a request; return (connection, response) for a 200, raise
        SkillfsError for any other status. A stream's reads are bound by
        timeout alone (None: never), a request's by timeout or self.timeout."""
        conn = self._connection(timeout if stream or timeout is not None else self.timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=self._headers(headers))
            except (BrokenPipeError, ConnectionResetError) as e:
                # The daemon may answer a request it refuses before it has
                # read the body, and close: the answer is there to read.
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise ConnectionError("the daemon closed the connection while the request was sent: %s" % e) from e
            else:
                resp = conn.getresponse()
            if resp.status != 200:
                raise _refused(resp)
        except BaseException:
            conn.close()
            raise
        return conn, resp

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[Mapping[str, str]] = None):
        """Send one request; return (body bytes, content type, response
        headers) of its 200 answer. path includes the query."""
        conn, resp = self._open(method, path, body, headers)
        try:
            data = resp.read()
            return data, resp.getheader("Content-Type", ""), resp.getheaders()
        finally:
            conn.close()

    def _json(self, method: str, path: str, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        hdr = {"Content-Type": "application/json"} if body is not None else None
        data, _, _ = self.request(method, path, body, hdr)
        return json.loads(data) if data else None

    # The daemon.

    def health(self) -> Dict[str, Any]:
        """GET /v1/health: {"ok": true, "sessions": N}."""
        return self._json("GET", "/v1/health")

    def status(self) -> Dict[str, Any]:
        """GET /v1/status (the operator's)."""
        return self._json("GET", "/v1/status")

    def whoami(self) -> Dict[str, Any]:
        """GET /v1/whoami: who the credential is, {"role", "session",
        "user", "token"} (the token's name, never its value)."""
        return self._json("GET", "/v1/whoami")

    # Sessions.

    def create_session(
        self,
        user: Optional[str] = None,
        skills: Optional[List[str]] = None,
        all: bool = False,
        preload: Optional[List[str]] = None,
        key: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        parent: Optional[str] = None,
    ) -> Dict[str, Any]:
        """POST /v1/sessions: open a session for user reading skills (or
        all the user may read), with preload's SKILL.md in its prompt.

        key makes the create idempotent: while a session of the user with
        that key is open, the same call returns it ("existing": true, and no
        token). labels are free key=value marks to find sessions by. parent
        opens a sub-agent's session, reading skills of its parent's set
        only; with a session's credential the caller's session is the
        parent. The answer of the create that made the session holds its
        token, once: keep it.
        """
        req: Dict[str, Any] = {}
        if user is not None:
            req["user"] = user
        if skills is not None:
            req["skills"] = list(skills)
        if all:
            req["all"] = True
        if preload is not None:
            req["preload"] = list(preload)
        if key is not None:
            req["key"] = key
        if labels:
            req["labels"] = dict(labels)
        if parent is not None:
            req["parent"] = parent
        return self._json("POST", "/v1/sessions", req)

    def session(self, id: str) -> Dict[str, Any]:
        """GET /v1/sessions/{id}."""
        return self._json("GET", _session_path(id))

    def sessions(self, host: Optional[str] = None, limit: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """The open sessions, oldest first, every page of GET /v1/sessions
        (of host only, if given)."""
        return self.find_sessions(host=host, limit=limit)

    def find_sessions(
        self,
        key: Optional[str] = None,
        user: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        host: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Iterator[Dict[str, Any]]:
        """The open sessions with client key key (of user), carrying every
        label of labels, on host: GET /v1/sessions?key=&user=&label=k=v,
        page after page (the Link header's next page)."""
        q: List[tuple] = []
        for name, value in (("key", key), ("user", user), ("host", host), ("limit", limit)):
            if value is not None:
                q.append((name, str(value)))
        for k, v in sorted((labels or {}).items()):
            q.append(("label", "%s=%s" % (k, v)))
        path: Optional[str] = "/v1/sessions" + ("?" + urllib.parse.urlencode(q) if q else "")
        while path:
            data, _, headers = self.request("GET", path)
            for s in json.loads(data):
                yield s
            path = _next_page(dict((k.lower(), v) for k, v in headers).get("link", ""))

    def set_skills(self, id: str, skills: Optional[List[str]] = None, all: bool = False,
                   preload: Optional[List[str]] = None) -> Dict[str, Any]:
        """PATCH /v1/sessions/{id}: replace the session's skills."""
        req: Dict[str, Any] = {"all": all}
        if skills is not None:
            req["skills"] = list(skills)
        if preload is not None:
            req["preload"] = list(preload)
        return self._json("PATCH", _session_path(id), req)

    def refresh(self, id: str) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/refresh: move the session to the current
        versions of its skills."""
        return self._json("POST", _session_path(id, "refresh"))

    def close(self, id: str) -> Dict[str, Any]:
        """DELETE /v1/sessions/{id}: {"closed": id}. Its token dies with it."""
        return self._json("DELETE", _session_path(id))

    def mount(self, id: str, target: str, pid: int = 0, api_socket: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/mounts: bind the session's view at target,
        in the mount namespace of process pid (0: the daemon's), and, with
        api_socket, the session's API socket at that path beside it."""
        req: Dict[str, Any] = {"target": target, "pid": pid}
        if api_socket is not None:
            req["api_socket"] = api_socket
        return self._json("POST", _session_path(id, "mounts"), req)

    def unmount(self, id: str, target: str, pid: int = 0) -> Dict[str, Any]:
        """DELETE /v1/sessions/{id}/mounts: remove a bind."""
        q = urllib.parse.urlencode({"target": target, "pid": str(pid)})
        return self._json("DELETE", _session_path(id, "mounts") + "?" + q)

    def rotate_token(self, id: str) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/token: a new token for the session,
        {"session", "token"}; the old one stops working."""
        return self._json("POST", _session_path(id, "token"))

    # What a tool loader asks each turn.

    def turn(self, id: str, message: str, read_tool: bool = True, format: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/turn: everything one turn of the agent
        needs, {"prompt", "selected", "text"}: the list of available skills
        (left out when the agent has no tool to read files, read_tool
        False) and, inlined, the skills selected for this turn (mentioned
        in message, preloaded, or always applied). format is "xml",
        "markdown" or "json"."""
        req: Dict[str, Any] = {"message": message, "read_tool": read_tool}
        if format is not None:
            req["format"] = format
        return self._json("POST", _session_path(id, "turn"), req)

    def prompt(self, id: str, format: Optional[str] = None) -> str:
        """GET /v1/sessions/{id}/prompt: the session's block of available
        skills for a system prompt, as text ("xml" or "markdown")."""
        path = _session_path(id, "prompt")
        if format is not None:
            path += "?" + urllib.parse.urlencode({"format": format})
        data, _, _ = self.request("GET", path)
        return data.decode("utf-8")

    def mentions(self, id: str, text: str) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/mentions: the skills a message names
        ($slug, /skill:slug args), with their SKILL.md: {"mentions": [...]}."""
        return self._json("POST", _session_path(id, "mentions"), {"text": text})

    def globs(self, id: str, paths: List[str]) -> Any:
        """POST /v1/sessions/{id}/globs: which of the session's skills apply
        to each of paths (their frontmatter's globs)."""
        return self._json("POST", _session_path(id, "globs"), {"paths": list(paths)})

    def activations(self, id: str) -> Dict[str, Any]:
        """GET /v1/sessions/{id}/activations: the skills the session
        activated, and the tools and MCP servers they add."""
        return self._json("GET", _session_path(id, "activations"))

    def audit(self, id: str) -> List[Dict[str, Any]]:
        """GET /v1/sessions/{id}/audit: the files the session read."""
        return self._json("GET", _session_path(id, "audit"))

    def resolve(self, id: str, uri: str) -> bytes:
        """GET /v1/sessions/{id}/resolve: the bytes of a file of the
        session's view named by a skill:// URI (skill://slug,
        skill://slug/SKILL.md, skill://slug/path)."""
        q = urllib.parse.urlencode({"uri": uri})
        data, _, _ = self.request("GET", _session_path(id, "resolve") + "?" + q)
        return data

    # Installing a skill from inside the agent.

    def install(
        self,
        id: str,
        path: Optional[str] = None,
        source: Optional[str] = None,
        ref: Optional[str] = None,
        data: Optional[bytes] = None,
        name: Optional[str] = None,
        content_type: Optional[str] = None,
        now: bool = False,
    ) -> Dict[str, Any]:
        """POST /v1/sessions/{id}/skills: install a skill as the session's
        user's own, from one of

        - path: a folder, ZIP or SKILL.md as the sandbox sees it (read
          with the sandboxed process's permissions);
        - source: a remote git source, at ref;
        - data: the bytes of a ZIP or a SKILL.md (content_type, else
          guessed: a ZIP starts with "PK"), named name.

        It joins the session's readable set at its next refresh (the next
        top-level turn), or at once with now. Returns {"slug", "name",
        "version", "joined"}.
        """
        given = [x is not None for x in (path, source, data)]
        if sum(given) != 1:
            raise ValueError("give one of path, source and data")
        p = _session_path(id, "skills")
        if data is not None:
            q: Dict[str, str] = {}
            if name is not None:
                q["name"] = name
            if now:
                q["now"] = "true"
            if content_type is None:
                content_type = "application/zip" if data[:2] == b"PK" else "text/markdown"
            if q:
                p += "?" + urllib.parse.urlencode(q)
            body, _, _ = self.request("POST", p, data, {"Content-Type": content_type})
            return json.loads(body)
        req: Dict[str, Any] = {"now": now}
        if path is not None:
            req["path"] = path
        else:
            req["source"] = source
            if ref is not None:
                req["ref"] = ref
        return self._json("POST", p, req)

    # Events.

    def events(
        self,
        id: Optional[str] = None,
        after: Optional[Union[int, str]] = None,
        reconnect: bool = False,
        retry: float = 0.5,
        retry_for: Optional[float] = 60.0,
        idle_timeout: Optional[float] = 60.0,
    ) -> Iterator[Dict[str, Any]]:
        """The events of session id (of every session without id), as a
        generator of their JSON ({"id", "type", "session", "slug", "at",
        ...}), from GET /v1/sessions/{id}/events.

        Without after, the stream starts with what happens from now on;
        with after (an event id, 0 for the start of what the daemon keeps)
        it first replays every event after it, then goes on live, none
        missing and none twice. A session's stream ends after its "closed"
        event, and the generator with it.

        With reconnect, a stream that breaks (the daemon restarted, the
        connection dropped) is opened again with Last-Event-ID set to the
        last event yielded, so nothing is missed; tries are retry seconds
        apart, for at most retry_for seconds each time (None: forever),
        after which the connection's error is raised. A "resync" event (the
        events after the id are no longer kept) is yielded: read the
        activations again; with reconnect, the stream goes on after it.
        A stream started without after that breaks before its first event
        starts again from then on: give after to miss nothing. An
        "unauthorized" event (the token was revoked, rotated or expired, its
        session moved) is yielded and ends the generator, reconnect or not:
        a new credential resumes from self.last_event_id.

        The daemon sends a comment every 15 s on an idle stream; one silent
        for idle_timeout seconds (None: wait forever) is taken as broken:
        reconnected with reconnect, else the timeout is raised.

        self.last_event_id is the id of the last event yielded. Close the
        generator (or leave the loop) to close the stream.
        """
        path = "/v1/events" if id is None else _session_path(id, "events")
        last = None if after is None else int(after)
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            conn = None
            try:
                conn, resp = self._open_retrying("GET", path, headers, reconnect, retry, retry_for, idle_timeout)
                for fields in parse_sse(_lines(resp)):
                    if "data" not in fields:
                        continue
                    ev = json.loads(fields["data"])
                    if "id" in fields:
                        last = int(fields["id"])
                        self.last_event_id = last
                    yield ev
                    if ev.get("type") == "closed" and id is not None:
                        return
                    if ev.get("type") == "unauthorized":
                        return  # the token no longer proves its principal: reconnecting would be refused
                    if ev.get("type") == "resync" and not reconnect:
                        return
            except (OSError, http.client.HTTPException):
                if not reconnect:
                    raise
            finally:
                if conn is not None:
                    conn.close()
            if not reconnect:
                return
            time.sleep(retry)

    def _open_retrying(self, method, path, headers, reconnect, retry, retry_for, idle_timeout):
        """_open for a stream, tried again while the daemon cannot be
        reached or is busy when reconnect is set."""
        deadline = None if retry_for is None else time.monotonic() + retry_for
        while True:
            try:
                return self._open(method, path, headers=headers, timeout=idle_timeout, stream=True)
            except (OSError, http.client.HTTPException, SkillfsError) as e:
                transient = not isinstance(e, SkillfsError) or e.code in ("busy", "unavailable")
                if not reconnect or not transient or (deadline is not None and time.monotonic() >= deadline):
                    raise
                wait = retry
                if isinstance(e, SkillfsError) and e.retry_after:
                    wait = max(wait, e.retry_after)
                time.sleep(wait)

    # Platform tokens (the operator's).

    def create_token(self, name: str, role: str, expires: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/tokens: a named platform token of role ("operator",
        "reader"), expiring after expires (a duration like "720h" or an
        RFC 3339 time) if given. The answer holds the token, once."""
        req: Dict[str, Any] = {"name": name, "role": role}
        if expires is not None:
            req["expires"] = expires
        return self._json("POST", "/v1/tokens", req)

    def tokens(self) -> List[Dict[str, Any]]:
        """GET /v1/tokens: the platform tokens (names, never the tokens)."""
        return self._json("GET", "/v1/tokens")

    def revoke_token(self, name: str) -> Any:
        """DELETE /v1/tokens/{name}."""
        return self._json("DELETE", "/v1/tokens/" + urllib.parse.quote(name, safe=""))


def _session_path(id: str, *rest: str) -> str:
    return "/".join(["/v1/sessions", urllib.parse.quote(id, safe="")] + list(rest))


def _next_page(link: str) -> Optional[str]:
    """The path of the page a Link header names rel="next", or None."""
    for part in link.split(","):
        target, _, params = part.strip().partition(">")
        if target.startswith("<") and 'rel="next"' in params:
            u = urllib.parse.urlsplit(target[1:])
            return u.path + ("?" + u.query if u.query else "")
    return None


def _lines(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    """The lines of a streamed answer, each as soon as it arrives."""
    while True:
        line = resp.readline()
        if not line:
            return
        yield line


def _refused(resp: http.client.HTTPResponse) -> SkillfsError:
    text = resp.read().decode("utf-8", "replace")
    try:
        body = json.loads(text)
        if not isinstance(body, dict):
            body = {}
    except ValueError:
        body = {}
    retry_after = None
    ra = resp.getheader("Retry-After")
    if ra and ra.isdigit():
        retry_after = float(ra)
    return SkillfsError(resp.status, body, text.strip(), retry_after)


def read_token(path: str) -> str:
    """The token in file path: its first line, without white space."""
    with open(path, encoding="utf-8") as f:
        return f.readline().strip()


# The command line.


def _labels(values: Optional[List[str]]) -> Dict[str, str]:
    out = {}
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise argparse.ArgumentTypeError("--label %r: want KEY=VALUE" % v)
        out[k] = val
    return out


def _list(value: Optional[str]) -> Optional[List[str]]:
    if value is None:
        return None
    return [s for s in value.split(",") if s]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="skillfs_client.py",
        description="A client of the skillfs API. JSON answers are printed as JSON, one value "
        "(events: one line per event); errors as the API's error JSON on standard error.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", help="the API's Unix socket (default: $SKILLFS_SOCKET)")
    where.add_argument("--url", help="http://HOST:PORT of the daemon's TCP listener (default: $SKILLFS_URL)")
    p.add_argument("--token", help="bearer token (default: $SKILLFS_TOKEN)")
    p.add_argument("--token-file", help="a file holding the bearer token (default: $SKILLFS_TOKEN_FILE)")
    p.add_argument("--as", dest="act_as", help="the user catalog calls act for (operator credential only)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for each request (default 30)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("health", help="is the daemon up")
    sub.add_parser("whoami", help="who the credential is")

    c = sub.add_parser("create", help="open a session")
    c.add_argument("--user")
    c.add_argument("--skills", help="comma-separated slugs")
    c.add_argument("--all", action="store_true", help="every skill the user may read")
    c.add_argument("--preload", help="comma-separated slugs")
    c.add_argument("--key", help="client key: the same key returns the open session")
    c.add_argument("--label", action="append", help="KEY=VALUE, repeatable")
    c.add_argument("--parent", help="open a sub-agent's session of this session")

    for name, what in (("show", "a session"), ("close", "close a session"), ("refresh", "refresh a session"),
                       ("activations", "what a session activated"), ("audit", "the files a session read"),
                       ("token", "rotate a session's token")):
        sub.add_parser(name, help=what).add_argument("id")

    f = sub.add_parser("find", help="find open sessions by key or labels")
    f.add_argument("--key")
    f.add_argument("--user")
    f.add_argument("--label", action="append", help="KEY=VALUE, repeatable (all must match)")
    f.add_argument("--host")

    t = sub.add_parser("turn", help="everything one turn needs")
    t.add_argument("id")
    t.add_argument("message")
    t.add_argument("--no-read-tool", action="store_true", help="the agent cannot read files: no list")
    t.add_argument("--format", choices=["xml", "markdown", "json"])

    pr = sub.add_parser("prompt", help="the session's block for a system prompt")
    pr.add_argument("id")
    pr.add_argument("--format", choices=["xml", "markdown"])

    for name, what, arg, nargs in (("mentions", "the skills a message names", "text", None),
                                   ("globs", "which skills apply to file paths", "paths", "+"),
                                   ("resolve", "a file of the session's view by skill:// URI", "uri", None)):
        one = sub.add_parser(name, help=what)
        one.add_argument("id")
        one.add_argument(arg, nargs=nargs)

    k = sub.add_parser("call", help="any route: print the answer's body as it is")
    k.add_argument("method")
    k.add_argument("path", help="the path and query, /v1/...")
    k.add_argument("--data", help="the request's body (JSON unless --content-type says otherwise)")
    k.add_argument("--content-type", default="application/json")

    e = sub.add_parser("events", help="a session's events (every session's without ID)")
    e.add_argument("id", nargs="?")
    e.add_argument("--after", help="resume after this event id (0: all kept)")
    e.add_argument("--count", type=int, help="stop after this many events")
    e.add_argument("--reconnect", action="store_true", help="reconnect with Last-Event-ID when the stream breaks")

    i = sub.add_parser("install", help="install a skill as the session's user's own")
    i.add_argument("id")
    src = i.add_mutually_exclusive_group(required=True)
    src.add_argument("--path", help="a folder, ZIP or SKILL.md as the sandbox sees it")
    src.add_argument("--source", help="a remote git source")
    src.add_argument("--file", help="upload this ZIP or SKILL.md")
    i.add_argument("--ref", help="with --source: branch, tag or commit")
    i.add_argument("--name", help="with --file: the upload's name")
    i.add_argument("--now", action="store_true", help="join the session's readable set at once")
    return p


class _StdoutClosed(Exception):
    """Whoever read the command's output stopped reading (| head)."""


def _out(data: Union[str, bytes], flush: bool = False) -> None:
    """Write data to standard output; a closed pipe there (and only there,
    not the daemon's connection) raises _StdoutClosed."""
    try:
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError as e:
        raise _StdoutClosed() from e


def _print(value: Any) -> None:
    _out(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _run(args: argparse.Namespace, c: Client) -> None:
    cmd = args.command
    # The commands of one session id, answering JSON.
    by_id = {"show": c.session, "close": c.close, "refresh": c.refresh, "activations": c.activations,
             "audit": c.audit, "token": c.rotate_token}
    if cmd in by_id:
        _print(by_id[cmd](args.id))
    elif cmd == "health":
        _print(c.health())
    elif cmd == "whoami":
        _print(c.whoami())
    elif cmd == "create":
        _print(c.create_session(args.user, skills=_list(args.skills), all=args.all, preload=_list(args.preload),
                                key=args.key, labels=args.label, parent=args.parent))
    elif cmd == "find":
        _print(list(c.find_sessions(key=args.key, user=args.user, labels=args.label, host=args.host)))
    elif cmd == "turn":
        _print(c.turn(args.id, args.message, read_tool=not args.no_read_tool, format=args.format))
    elif cmd == "prompt":
        _out(c.prompt(args.id, args.format))
    elif cmd == "mentions":
        _print(c.mentions(args.id, args.text))
    elif cmd == "globs":
        _print(c.globs(args.id, args.paths))
    elif cmd == "resolve":
        _out(c.resolve(args.id, args.uri))
    elif cmd == "call":
        body = None if args.data is None else args.data.encode()
        hdr = None if body is None else {"Content-Type": args.content_type}
        data, _, _ = c.request(args.method.upper(), args.path, body, hdr)
        _out(data)
    elif cmd == "events":
        n = 0
        if args.count is not None and args.count <= 0:
            return
        for ev in c.events(args.id, after=args.after, reconnect=args.reconnect):
            _out(json.dumps(ev, sort_keys=True) + "\n", flush=True)
            n += 1
            if args.count is not None and n >= args.count:
                break
    elif cmd == "install":
        if args.file is not None:
            _print(c.install(args.id, data=args.data, name=args.name or os.path.basename(args.file), now=args.now))
        else:
            _print(c.install(args.id, path=args.path, source=args.source, ref=args.ref, now=args.now))


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; returns its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("SKILLFS_TOKEN") or None
    token_file = args.token_file or os.environ.get("SKILLFS_TOKEN_FILE")
    url = args.url or (None if args.socket else os.environ.get("SKILLFS_URL"))
    sock = args.socket or (None if url else os.environ.get("SKILLFS_SOCKET"))
    if not url and not sock:
        parser.error("give --socket or --url (or set SKILLFS_SOCKET or SKILLFS_URL)")
    try:
        if token is None and token_file:
            token = read_token(token_file)
        c = Client(socket=sock if not url else None, url=url, token=token, act_as=args.act_as, timeout=args.timeout)
        if args.command == "events" and args.after is not None:
            int(args.after)
        labels = _labels(getattr(args, "label", None))
        if args.command == "install" and args.file is not None:
            with open(args.file, "rb") as f:
                args.data = f.read()
    except (OSError, ValueError, argparse.ArgumentTypeError) as e:
        parser.error(str(e))
    args.label = labels
    try:
        _run(args, c)
    except SkillfsError as e:
        body = e.body or {"error": e.message, "code": e.code}
        sys.stderr.write(json.dumps(body, sort_keys=True) + "\n")
        return EXIT_CODES.get(e.code, 1)
    except _StdoutClosed:
        # Whoever read the output stopped reading (| head): not the daemon's fault.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (OSError, http.client.HTTPException) as e:
        sys.stderr.write("skillfs_client.py: cannot reach the daemon: %s\n" % e)
        return EXIT_NO_DAEMON
    except KeyboardInterrupt:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
