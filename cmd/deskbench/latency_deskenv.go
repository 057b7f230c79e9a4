package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// deskenvServer wires the browser client and the stream on the display named
// in c, as the appliance does.
func deskenvServer(ctx context.Context, c serveConfig, log *slog.Logger) (http.Handler, func() error, error) {
	return nil, nil, errors.New("the stream package is not built yet")
}
