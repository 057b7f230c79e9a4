package hci_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
)

// A model's tool input, parsed and checked against the model space it was
// shown (a 1920x1200 screen scaled to 1280x800), then mapped to the screen.
func ExampleParseAction() {
	space, err := hci.NewSpace(1920, 1200, "auto")
	if err != nil {
		log.Fatal(err)
	}
	a, err := hci.ParseAction([]byte(`{"action":"left_click","coordinate":[640,400]}`))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Validate(space); err != nil {
		log.Fatal(err)
	}
	x, y := space.ToScreen(a.Coordinate[0], a.Coordinate[1])
	fmt.Println(a, "in", space)
	fmt.Println("on the screen at", x, y)

	// Out of the model space is an error, never a clamp.
	bad, _ := hci.ParseAction([]byte(`{"action":"left_click","coordinate":[1280,400]}`))
	fmt.Println(bad.Validate(space) != nil)
	// Output:
	// {"action":"left_click","coordinate":[640,400]} in 1280x800 on 1920x1200
	// on the screen at 960 600
	// true
}

// An executor types into a display through XTEST; every action is published
// on its bus, whoever sent it.
func ExampleExecutor_Do() {
	ctx := context.Background()
	d, err := display.Start(ctx, display.Config{
		WindowManager: []string{}, Apps: [][]string{}, // a bare server
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	w, h := d.Size()
	space, _ := hci.NewSpace(w, h, "off")
	exec, err := hci.NewExecutor(d, hci.Options{Space: space})
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()
	events, stop := exec.Bus().Subscribe(16)
	defer stop()

	res, err := exec.Do(ctx, hci.Action{Action: hci.ActType, Text: "héllo"}, hci.SourceAgent)
	if err != nil {
		log.Fatal(err)
	}
	ev := <-events
	fmt.Println(ev.Source, ev.Action, "wants a settled screenshot:", res.Settle && res.Screenshot)
	// Output: agent {"action":"type","text":"héllo"} wants a settled screenshot: true
}
