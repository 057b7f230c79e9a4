// Package appliance is deskenv composed: one desktop (New) or a pool of
// them handed out by leases (NewPool), each an Xvfb session with its
// executor, screen capture, MCP server, WebRTC stream, control plane and
// recorder, all served behind one front door (Handler).
//
// It is the one package that imports the features (display, hci, screen,
// mcpserver, stream, control, record) and wires them together; features
// never import each other. What a desktop is told comes in a Config of
// settings (DefaultConfig, then Validate); what it needs to run, a context
// and a logger, comes as constructor arguments. Who the desktop session
// runs as (a user of its own when deskenv may switch users) is decided here
// too, and the front door refuses the session's own connections
// (ConnContext).
//
// cmd/deskenv turns flags into a Config and serves Handler; tests start a
// pool in-process and drive its lease API over HTTP.
package appliance
