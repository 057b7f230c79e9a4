package screen_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/screen"
)

// A model-space screenshot of a 1920x1200 display, as an agent is shown it:
// captured through MIT-SHM, scaled to 1280x800 and encoded as PNG. A second
// shot of an unchanged screen reuses the first one's encoding.
func ExampleShooter_Shot() {
	ctx := context.Background()
	d, err := display.Start(ctx, display.Config{
		Width: 1920, Height: 1200,
		WindowManager: []string{}, Apps: [][]string{}, // a bare server
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	capt, err := screen.NewCapturer(d)
	if err != nil {
		log.Fatal(err)
	}
	defer capt.Close()
	shooter := screen.NewShooter(capt, screen.ShooterOptions{ModelW: 1280, ModelH: 800})

	// Wait until nothing moves, then shoot twice.
	if _, _, err := capt.Settle(ctx, screen.SettleOptions{}); err != nil {
		log.Fatal(err)
	}
	first, err := shooter.Shot(ctx)
	if err != nil {
		log.Fatal(err)
	}
	second, err := shooter.Shot(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.MIME, first.Width, first.Height)
	fmt.Println("second shot re-encoded:", second.Changed, "encodes:", shooter.Encodes())
	// Output:
	// image/png 1280 800
	// second shot re-encoded: false encodes: 1
}
