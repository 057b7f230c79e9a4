package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Act runs one tool call as an agent's step, the way OpenEnv's step does:
// through the MCP server's tool, so the action is validated, goes over the
// executor's bus (the episode counts it) and the screen settles after it.
// deskenv tasks check replays a task's solution with it. The error is the
// tool's own (bad arguments, an action that could not run).
func (c *Control) Act(ctx context.Context, tool string, args json.RawMessage) error {
	if c.tools == nil {
		return errors.New("no MCP tools are wired into the control plane: actions cannot run")
	}
	obs := c.callTool(ctx, tool, args)
	if obs.Error != nil {
		return fmt.Errorf("%s: %s", obs.Error.ErrorType, obs.Error.Message)
	}
	return nil
}
