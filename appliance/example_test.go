package appliance_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/deskenv/deskenv/appliance"
)

// A pool of two bare desktops served on a port of its own: POST /leases
// hands one out with an agent token, its MCP endpoint at /d/{i}/mcp.
func ExampleNewPool() {
	cfg := appliance.DefaultConfig()
	cfg.Desktops, cfg.WM, cfg.Apps, cfg.NoStream = 2, "", "", true
	cfg.OperatorToken = os.Getenv("DESKENV_OPERATOR_TOKEN")
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	pool, err := appliance.NewPool(context.Background(), cfg, slog.Default())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: pool.Handler(), ConnContext: appliance.ConnContext}
	srv.ListenAndServe()
}
