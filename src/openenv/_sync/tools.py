# GENERATED from src/openenv/_async/tools.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The MCP tools room of ``Env``: ``list_tools``, ``call_tool``, ``get_tool`` and ``mode``.

Simulation mode (default), as OpenEnv's MCPToolClient: call_tool is the
step-loop action ``call_tool`` (a real step: reward, done, step_count).
list_tools asks with a JSON-RPC ``mcp`` frame on the session's own
WebSocket (no step); if the server answers ``-32603 Environment does not
support MCP`` (OpenEnv 0.3.0 with an environment that takes MCP actions
only in ``step``), it uses the ``list_tools`` step action instead, for
the rest of the session.  Tools are cached per client.

Production mode: ``POST /mcp`` with ``params.session_id`` of a session
made by ``openenv/session/create`` that the WebSocket attaches to with
``/ws?session_id=`` (as OpenEnv 0.10's production-mode client does); closed
with ``openenv/session/close``.  The connection room calls back into this one
when it opens a WebSocket (``_session_ws_url()``, ``_on_open()``).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed

from .._adapters import connect_kwargs, http_error
from .._core import frames, mcp
from .._core.errors import CapacityReached, ServerValidationError, ToolError, ToolNotFound
from .._core.mcp import PRODUCTION, McpState
from .._core.session import Request, RequestKind, attach_plan, created, release_on_close, ws_target
from .._core.urls import redact_url
from .._shim_sync import loop_token, ws_connect, ws_recv
from .connection import _Connection
from .http import http_client

if TYPE_CHECKING:
    from .._core.tool_models import Tool, ToolResult


class _Tools(_Connection):
    """The MCP methods of ``Env`` (a mixin over the connection room; ``Env.__init__`` sets the state)."""

    _mode: str
    _mcp: McpState
    _resources: ExitStack
    _tools_cache: list[Tool] | None

    @property
    def mode(self) -> str:
        """``"simulation"`` or ``"production"`` (read-only)."""
        return self._mode

    def list_tools(self, use_cache: bool = True) -> list[Tool]:
        """The environment's MCP tools.

        The list is cached per client, as OpenEnv's ``MCPToolClient`` caches
        it: it is kept across reconnects (tools belong to the environment
        class, not to one session), and sessions made by [`new_session()`][openenv.sync.Env.new_session]
        afterwards start with it.  In
        simulation mode it is asked with an ``mcp`` frame, which is not a step
        (or, for servers that take MCP only in ``step``, with the
        ``list_tools`` step action).

        Args:
            use_cache: return the cached list when there is one; ``False``
                asks the server again (and refreshes the cache).

        Raises:
            ToolError: the server refused (``code`` and ``data`` from its
                JSON-RPC error), e.g. ``-32603`` when the environment has no
                MCP support at all.  Never an empty list in place of an error.
        """
        if use_cache and self._tools_cache is not None:
            return list(self._tools_cache)
        tools = self._fetch_tools()
        self._tools_cache = tools
        return list(tools)

    def _fetch_tools(self) -> list[Tool]:
        if self._mode == PRODUCTION:
            return mcp.parse_tools(self._mcp_http(mcp.LIST_TOOLS, {}))
        if not self._mcp.via_step:
            try:
                return mcp.parse_tools(self._mcp_frame(mcp.LIST_TOOLS, {}))
            except ToolError as exc:
                if not mcp.is_unsupported(exc):
                    raise
                observation, _ = self._mcp_step(mcp.list_tools_action(), exc)
                self._mcp.via_step = True  # this server answers tools only through the step loop
                return mcp.parse_step_tools(observation)
        observation, _ = self._mcp_step(mcp.list_tools_action(), None)
        return mcp.parse_step_tools(observation)

    def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Call the tool ``name`` with ``arguments`` (an argument may itself be called ``name``).

        In simulation mode (default) the call is the step action
        ``{"type": "call_tool", "tool_name": name, "arguments": {...}}``, as
        OpenEnv's ``MCPToolClient`` sends it: a real step, which the
        environment may count and score; the episode is then in progress.  In
        production mode it is a ``tools/call`` over ``POST /mcp`` (no step).

        Returns:
            A [`ToolResult`][openenv.sync.ToolResult]: ``data`` is the decoded return
            value, ``content`` the MCP content items (``texts``/``text`` for
            their text), ``structured_content`` and ``is_error`` as the server
            sent them, and (simulation mode) the step's ``reward`` and ``done``.

        Raises:
            ToolNotFound: the server does not know the tool.
            ToolError: the tool raised, or the server refused the call.  In
                simulation mode the failed call was still a step: the error
                carries its ``reward``, ``done`` and step ``result``.
            ServerValidationError: (simulation mode) the environment takes no
                ``call_tool`` step actions (it has no MCP tools).
            InvalidAction: an argument cannot be sent as JSON (nothing was sent).
        """
        if self._mode == PRODUCTION:
            params = {"name": name, "arguments": arguments}
            return mcp.parse_tool_result(self._mcp_http(mcp.CALL_TOOL, params, tool=name))
        observation, result = self._mcp_step(mcp.call_tool_action(name, arguments), None)
        return mcp.parse_step_call(observation, name, reward=result.reward, done=result.done, result=result)

    def get_tool(self, name: str) -> Tool:
        """The tool called ``name`` (from [`list_tools()`][openenv.sync.Env.list_tools]).

        Raises:
            ToolNotFound: no such tool (the message lists the ones there are).
        """
        tools = self.list_tools()
        for tool in tools:
            if tool.name == name:
                return tool
        known = ", ".join(sorted(t.name for t in tools)) or "none"
        raise ToolNotFound(f"the environment has no tool {name!r} (tools: {known})", tool=name)

    def _mcp_frame(self, method: str, params: dict[str, Any], *, tool: str | None = None) -> Any:
        """One JSON-RPC request in an ``mcp`` frame on the session WebSocket."""
        request_id = self._mcp.ids.next()
        request = Request(
            RequestKind.MCP,
            mcp.rpc_request(method, params, request_id),
            lambda data: mcp.rpc_result(data, request_id, tool=tool),
        )
        return self._request(request)

    def _mcp_step(self, action: dict[str, Any], unsupported: ToolError | None) -> Any:
        """An MCP action through the step loop: (observation dict, step result)."""
        try:
            result = self._request(Request(RequestKind.TOOL_STEP, action, frames.parse_step_result))
        except ServerValidationError as exc:
            if unsupported is not None:
                raise unsupported from exc  # the environment takes no MCP actions either
            raise
        self._mcp.via_step = True
        return result.observation, result

    def _mcp_http(self, method: str, params: dict[str, Any], *, tool: str | None = None) -> Any:
        """One JSON-RPC request over ``POST /mcp`` against this client's session."""
        self._check_open()
        if self._ws is None or self._mcp.session_id is None:
            self._connect()
        assert self._mcp.session_id is not None
        return self._mcp_post(method, {**params, "session_id": self._mcp.session_id}, tool=tool)

    def _mcp_post(self, method: str, params: dict[str, Any], *, tool: str | None = None) -> Any:
        import httpx  # lazily: only health checks, schemas and production MCP need it

        url = self._endpoints.http("/mcp")
        if self._mcp.http is None:
            self._mcp.http = http_client(self._endpoints, self._options)
            self._resources.callback(self._mcp_release)
        request_id = self._mcp.ids.next()
        try:
            response = self._mcp.http.post(url, json=mcp.rpc_request(method, params, request_id))
        except httpx.HTTPError as exc:
            raise http_error(exc, url, self._options) from None
        secrets = self._options.secrets(self._endpoints.base_url)
        body = mcp.http_json(response.status_code, response.content, redact_url(url), secrets)
        return mcp.rpc_result(body, request_id, tool=tool)

    def _session_ws_url(self) -> str:
        """The ``/ws`` URL to open: in production mode, attached to an HTTP-created session."""
        target = ws_target(self._mode, self._mcp, self._endpoints.ws_url)
        if target.create:
            created(self._mcp, mcp.session_id_of(self._mcp_post(mcp.SESSION_CREATE, {})))
            target = ws_target(self._mode, self._mcp, self._endpoints.ws_url)
        assert target.url is not None
        return target.url

    def _on_open(self) -> None:
        """Production mode: check that the new WebSocket serves this client's MCP session."""
        if self._mode == PRODUCTION:
            self._check_attach()

    def _ws_session_id(self) -> str:
        """Ask the WebSocket which session it serves (``openenv/session/create`` over ``/ws``)."""
        assert self._ws is not None
        request_id = self._mcp.ids.next()
        try:
            self._ws.send(frames.encode_mcp(mcp.rpc_request(mcp.SESSION_CREATE, {}, request_id)))
        except ConnectionClosed:
            pass  # refused at once (CAPACITY_REACHED): the reason is still to be read
        raw = ws_recv(self._ws, self._options.message_timeout)
        return mcp.session_id_of(mcp.rpc_result(frames.decode_reply(raw, frames.MCP), request_id))

    def _check_attach(self) -> None:
        """Production mode: make sure the WebSocket and the HTTP calls share one session.

        OpenEnv 0.3.0 servers ignore ``/ws?session_id=`` and give the socket a
        second session (which may not even fit: ``CAPACITY_REACHED``).  Then
        the HTTP session is closed and the HTTP calls name the socket's own
        session instead, so one session is used, as it should be.
        """
        try:
            try:
                own = self._ws_session_id()
            except CapacityReached:
                own = None  # the HTTP session holds the slot the socket wanted
            plan = attach_plan(self._mcp, own)
            if plan.ok:
                return
            if plan.reconnect:
                self._shutdown(send_close=False)
            if plan.release is not None:
                self._mcp_post(mcp.SESSION_CLOSE, {"session_id": plan.release})
            if plan.reconnect:
                stack = ExitStack()
                ws = stack.enter_context(
                    ws_connect(self._endpoints.ws_url, **connect_kwargs(self._options, self._endpoints))
                )
                self._stack, self._ws, self._loop = stack, ws, loop_token()
                self._session.opened()
                self._mcp.session_id = self._ws_session_id()
        except BaseException:
            self._shutdown(send_close=True)
            raise

    def _mcp_release(self) -> None:
        """On close: end the HTTP-created session (after the socket detached), close the HTTP client."""
        http, self._mcp.http = self._mcp.http, None
        try:
            release = release_on_close(self._mcp)
            if release is not None:
                try:
                    self._mcp_post_with(http, mcp.SESSION_CLOSE, {"session_id": release})
                except Exception:  # best effort: the server may be gone already
                    pass
        finally:
            if http is not None:
                http.close()

    def _mcp_post_with(self, http: Any, method: str, params: dict[str, Any]) -> Any:
        url = self._endpoints.http("/mcp")
        request_id = self._mcp.ids.next()
        response = http.post(url, json=mcp.rpc_request(method, params, request_id))
        secrets = self._options.secrets(self._endpoints.base_url)
        body = mcp.http_json(response.status_code, response.content, redact_url(url), secrets)
        return mcp.rpc_result(body, request_id)
