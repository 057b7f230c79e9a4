package hci

import "context"

// viaKey keys the dialect in a context.
type viaKey struct{}

// WithVia marks the actions run with ctx as said in another model's tool
// (mcpserver's dialects: "openai", "gemini", "pyautogui"): Do puts it in
// the bus event (Event.Via), so a recording keeps which dialect an agent
// spoke beside the canonical action. A context carries it because it is
// about the request, not the action: the same Action runs the same way
// whatever tool asked for it.
func WithVia(ctx context.Context, via string) context.Context {
	return context.WithValue(ctx, viaKey{}, via)
}

// ViaOf is the dialect WithVia put in ctx, or "".
func ViaOf(ctx context.Context) string {
	v, _ := ctx.Value(viaKey{}).(string)
	return v
}
