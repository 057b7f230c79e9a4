package stream

import "context"

// loop will capture and encode once internal/codec and image land; until then
// viewers negotiate, get control and send input, but receive no frames.
func (p *pipeline) loop(ctx context.Context, done chan struct{}) { <-ctx.Done(); close(done) }
