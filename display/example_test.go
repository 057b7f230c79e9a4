package display_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"syscall"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/deskenv/deskenv/display"
)

// A package that keeps state on the X server (here, only the root window
// it read) keeps it beside the Follower's generation and builds it again
// when Get hands out another connection: after the server was restarted,
// the same code goes on working.
func ExampleDisplay_Follow() {
	ctx := context.Background()
	d, err := display.Start(ctx, display.Config{
		WindowManager: []string{}, Apps: [][]string{}, // a bare server
		RestartOnCrash: true,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	f := d.Follow(display.DropEvents)
	defer f.Close()

	var (
		gen  uint64 // the generation root belongs to
		root xproto.Window
	)
	pointer := func() error {
		c, g, err := f.Get(ctx)
		if err != nil {
			return err
		}
		if g != gen {
			gen, root = g, xproto.Setup(c).DefaultScreen(c).Root
			fmt.Println("set up a new connection")
		}
		_, err = xproto.QueryPointer(c, root).Reply()
		return err
	}

	if err := pointer(); err != nil {
		log.Fatal(err)
	}
	if err := pointer(); err != nil { // the same connection
		log.Fatal(err)
	}
	syscall.Kill(d.ServerPID(), syscall.SIGKILL)
	for deadline := time.Now().Add(20 * time.Second); d.Restarts() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := pointer(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// set up a new connection
	// set up a new connection
}
