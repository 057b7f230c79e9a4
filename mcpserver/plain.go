package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// OpenEnv's production mode speaks JSON-RPC over plain HTTP to POST /mcp:
// one request, one JSON answer, no MCP handshake, no session header and no
// event stream (meta-pytorch/OpenEnv at 685de411, src/openenv/core/
// mcp_client.py, _production_mcp_request; the server side is mcp_endpoint
// in src/openenv/core/env_server/http_server.py). Its client first asks for
// a session with openenv/session/create, then sends tools/list and
// tools/call with that session_id among the params, and ends with
// openenv/session/close. `openenv validate` (src/openenv/cli/_validation.py)
// posts {} and wants a 200 whose JSON has "jsonrpc": "2.0".
//
// mcp-go's streamable HTTP server refuses such requests (404, "Invalid
// session ID"): it wants an initialize first. plainRPC answers them itself,
// each as one stateless call through the same MCP server, so the tools, their
// checks and the agent token (the door's) are the ones streamable HTTP
// clients get.

// plainRPC serves OpenEnv's production-mode JSON-RPC on POST /mcp and hands
// every other request to next, the streamable HTTP server.
type plainRPC struct {
	mcp  *server.MCPServer
	next http.Handler
}

// Methods of OpenEnv's MCP session extension (http_server.py, mcp_handler).
const (
	methodSessionCreate = "openenv/session/create"
	methodSessionClose  = "openenv/session/close"
)

func (p plainRPC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !plainCandidate(r) {
		p.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// Over the door's limit or too slow: the door words the answer.
		http.Error(w, "cannot read the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var env struct {
		Method string `json:"method"`
	}
	// A body that does not decode goes to HandleMessage too, which answers
	// a JSON-RPC parse error as OpenEnv does.
	_ = json.Unmarshal(body, &env)
	if env.Method == string(mcp.MethodInitialize) {
		// A client starting an MCP session without asking for an event
		// stream: streamable HTTP answers it in JSON.
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.next.ServeHTTP(w, r)
		return
	}
	p.answer(w, p.handle(r.Context(), env.Method, body))
}

// plainCandidate reports a POST that no streamable HTTP client would send:
// no session id, no protocol version header and no event stream accepted.
// Streamable HTTP clients accept text/event-stream on every POST (the MCP
// specification demands it), so they never come here.
func plainCandidate(r *http.Request) bool {
	return r.Method == http.MethodPost &&
		r.Header.Get(server.HeaderKeySessionID) == "" &&
		r.Header.Get(server.HeaderKeyProtocolVersion) == "" &&
		!acceptsEventStream(r.Header)
}

// acceptsEventStream reports whether any Accept header names
// text/event-stream.
func acceptsEventStream(h http.Header) bool {
	for _, line := range h.Values("Accept") {
		for _, part := range strings.Split(line, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// handle answers one request: the session methods here, everything else
// (tools/list, tools/call, ping, errors) by the MCP server without a session.
func (p plainRPC) handle(ctx context.Context, method string, body []byte) any {
	switch method {
	case methodSessionCreate, methodSessionClose:
		return sessionAnswer(method, body)
	}
	resp := p.mcp.HandleMessage(ctx, body)
	if resp == nil {
		return nil // a notification: no answer
	}
	return resp
}

// answer writes a JSON-RPC answer with status 200 as OpenEnv's mcp_endpoint
// does, errors included; a notification gets 202 and no body, as in
// streamable HTTP.
func (plainRPC) answer(w http.ResponseWriter, resp any) {
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, "cannot encode the JSON-RPC answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// sessionAnswer answers openenv/session/create and close. deskenv has one
// desktop and every request drives it, so a session holds nothing: create
// hands out a fresh id for the client to carry, the id is ignored by
// tools/list and tools/call, and close has nothing to release.
func sessionAnswer(method string, body []byte) any {
	var req struct {
		ID     any            `json:"id"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		// Only params can fail here: the method decoded already.
		return mcp.NewJSONRPCError(mcp.NewRequestId(req.ID), mcp.INVALID_PARAMS, "Params must be an object", nil)
	}
	id := mcp.NewRequestId(req.ID)
	if method == methodSessionCreate {
		return mcp.NewJSONRPCResultResponse(id, map[string]any{"session_id": newSessionID()})
	}
	sid, _ := req.Params["session_id"].(string)
	if sid == "" {
		return mcp.NewJSONRPCError(id, mcp.INVALID_PARAMS, "Invalid params - 'session_id' is required", nil)
	}
	return mcp.NewJSONRPCResultResponse(id, map[string]any{"session_id": sid, "closed": true})
}

// newSessionID is a random id for openenv/session/create.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
